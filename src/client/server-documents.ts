/**
 * Latency compensation's bookkeeping, as Meteor's client does it: for every
 * document a method stub wrote, the server's version of it is kept aside
 * (starting from the version before the stub's first write) and the server's
 * messages for that document change this copy, not the one on screen. When
 * the `updated` of the last method whose stub wrote the document arrives,
 * the screen gets exactly the server's version: a refused write is undone, a
 * different server write wins. Documents no stub wrote are not held at all.
 */
import { applyDocumentMessage, type Document, type DocumentMessage } from './documents.js';

interface Held {
  readonly collection: string;
  readonly id: string;
  /** The server's version; undefined while the server has no such document. */
  document: Document | undefined;
  /** Methods whose stub wrote the document and whose `updated` has not arrived. */
  readonly writers: Set<string>;
  /** Called once the document is released. */
  readonly onRelease: Array<() => void>;
}

export class ServerDocuments {
  private readonly held = new Map<string, Map<string, Held>>();
  private readonly byMethod = new Map<string, Held[]>();

  get size(): number {
    let size = 0;
    for (const docs of this.held.values()) size += docs.size;
    return size;
  }

  /** A stub of `methodId` is about to write a document; `original` is what the client showed before. */
  track(collection: string, id: string, original: Document | undefined, methodId: string): void {
    let docs = this.held.get(collection);
    if (!docs) this.held.set(collection, (docs = new Map()));
    let entry = docs.get(id);
    if (!entry) {
      entry = { collection, id, document: original, writers: new Set(), onRelease: [] };
      docs.set(id, entry);
    }
    if (entry.writers.has(methodId)) return;
    entry.writers.add(methodId);
    let written = this.byMethod.get(methodId);
    if (!written) this.byMethod.set(methodId, (written = []));
    written.push(entry);
  }

  /** The methods whose stubs' writes are held. */
  methods(): string[] {
    return [...this.byMethod.keys()];
  }

  /** Applies a server message to the held copy; false when the document is not held (apply it to the store). */
  absorb(message: DocumentMessage): boolean {
    const entry = this.held.get(message.collection)?.get(message.id);
    if (!entry) return false;
    const scratch = new Map<string, Document>(entry.document ? [[message.id, entry.document]] : []);
    applyDocumentMessage(scratch, message);
    entry.document = scratch.get(message.id);
    return true;
  }

  /**
   * `methodId`'s writes are done on the server: each document no other
   * pending method wrote goes to `show` with the server's version, then the
   * callbacks waiting for those documents run.
   */
  release(methodId: string, show: (collection: string, id: string, document: Document | undefined) => void): void {
    const written = this.byMethod.get(methodId);
    if (!written) return;
    this.byMethod.delete(methodId);
    const released: Held[] = [];
    for (const entry of written) {
      entry.writers.delete(methodId);
      if (entry.writers.size > 0) continue;
      this.held.get(entry.collection)?.delete(entry.id);
      show(entry.collection, entry.id, entry.document);
      released.push(entry);
    }
    for (const entry of released) for (const callback of entry.onRelease.splice(0)) callback();
  }

  /**
   * Runs `callback` once every document now held for a method that was sent
   * has been released (at once when there is none): a method's result or a
   * subscription's readiness is reported only when the server's data it
   * depends on is on screen.
   */
  whenReleased(callback: () => void, sent: (methodId: string) => boolean): void {
    let waiting = 0;
    const done = () => {
      if (--waiting === 0) callback();
    };
    for (const docs of this.held.values()) {
      for (const entry of docs.values()) {
        if (![...entry.writers].some(sent)) continue;
        waiting++;
        entry.onRelease.push(done);
      }
    }
    if (waiting === 0) callback();
  }

  /**
   * A new session replaces the server's data: every held copy becomes the
   * document `next` has for it, and `next` takes the version on screen
   * instead, so that switching to `next` leaves stub writes in place.
   */
  rebase(next: Map<string, Map<string, Document>>, shown: (collection: string, id: string) => Document | undefined): void {
    for (const [collection, docs] of this.held) {
      let target = next.get(collection);
      if (!target) next.set(collection, (target = new Map()));
      for (const [id, entry] of docs) {
        entry.document = target.get(id);
        const onScreen = shown(collection, id);
        if (onScreen) target.set(id, onScreen);
        else target.delete(id);
      }
    }
  }
}
