/**
 * The client's copy of the server's documents, one collection per name, with
 * the latency compensation bookkeeping (server-documents.ts) in front of it:
 * data messages for documents a pending stub wrote go to the held copies,
 * everything else straight to the collections.
 */
import type { Document, DocumentMessage } from './documents.js';
import { applyDocumentMessage } from './documents.js';
import { LocalCollection, type ActiveStub, type CollectionHost } from './local-collection.js';
import type { QueryObserver } from './query-observer.js';
import { ServerDocuments } from './server-documents.js';

const WRITE_INTERVAL_MS = 5;

export class LocalStore implements CollectionHost {
  readonly batch = { depth: 0, dirty: new Set<QueryObserver>() };
  readonly held = new ServerDocuments();
  /** The stub running now, if any (set by the client around a stub call). */
  stub: ActiveStub | undefined;
  private readonly collections = new Map<string, LocalCollection>();
  /** Set while server messages are being buffered (see applyBuffered). */
  private timer: ReturnType<typeof setTimeout> | undefined;

  activeStub(): ActiveStub | undefined {
    return this.stub;
  }

  collection(name: string): LocalCollection {
    let collection = this.collections.get(name);
    if (!collection) {
      collection = new LocalCollection(name, this);
      this.collections.set(name, collection);
    }
    return collection;
  }

  apply(message: DocumentMessage): void {
    if (!this.held.absorb(message)) this.collection(message.collection).apply(message);
  }

  /** Shows the server's version of what `methodId`'s stub wrote (its `updated` arrived). */
  release(methodId: string): void {
    this.inBatch(() => this.held.release(methodId, (collection, id, doc) => this.collection(collection).set(id, doc)));
  }

  /**
   * Makes the store hold exactly what `messages` build from nothing (the new
   * session's data), except documents pending stubs wrote, which stay as
   * shown: how the client switches to a new session.
   */
  reset(messages: readonly DocumentMessage[]): void {
    const next = new Map<string, Map<string, Document>>();
    for (const message of messages) {
      let docs = next.get(message.collection);
      if (!docs) next.set(message.collection, (docs = new Map()));
      applyDocumentMessage(docs, message);
    }
    this.held.rebase(next, (collection, id) => this.collections.get(collection)?.get(id));
    this.inBatch(() => {
      for (const name of new Set([...this.collections.keys(), ...next.keys()])) {
        this.collection(name).replaceAll(next.get(name) ?? new Map());
      }
    });
  }

  /** Shows the server's version of everything stubs wrote (their calls will not be answered). */
  releaseAll(): void {
    for (const methodId of this.held.methods()) this.release(methodId);
  }

  /**
   * Applies a server message, with observers refreshed once for all those
   * that arrive within WRITE_INTERVAL_MS of the first (as Meteor's client
   * buffers writes): a subscription's thousands of `added` refresh a query,
   * and re-render a component, a few times rather than once per document. The
   * documents are stored at once; {@link flushWrites} ends the batch early.
   */
  applyBuffered(message: DocumentMessage): void {
    if (this.timer === undefined) {
      this.batch.depth++;
      this.timer = setTimeout(() => this.flushWrites(), WRITE_INTERVAL_MS);
    }
    this.apply(message);
  }

  flushWrites(): void {
    if (this.timer === undefined) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.endBatch();
  }

  /** Runs `work` with observers refreshed once at the end rather than after each change. */
  inBatch<R>(work: () => R): R {
    this.batch.depth++;
    try {
      return work();
    } finally {
      this.endBatch();
    }
  }

  private endBatch(): void {
    if (--this.batch.depth > 0) return;
    const dirty = [...this.batch.dirty];
    this.batch.dirty.clear();
    for (const observer of dirty) observer.refresh();
  }
}
