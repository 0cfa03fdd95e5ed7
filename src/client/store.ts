/**
 * The client's copy of the server's documents, one collection per name, with
 * change notifications so that a UI can follow it.
 */
import { idStringify } from '../ddp/ids.js';
import {
  applyDocumentMessage,
  replaceDocuments,
  type Document,
  type DocumentChange,
  type DocumentMessage,
} from './documents.js';
import { ListenerSet } from './emitter.js';

/** Read access to one collection. Returned documents are shared: treat them as read-only. */
export interface ClientCollection<T extends object = Document> {
  readonly name: string;
  readonly size: number;
  /** All documents, or those the predicate accepts, in arrival order. */
  find(predicate?: (doc: T) => boolean): T[];
  /** The first document the predicate accepts. */
  findOne(predicate: (doc: T) => boolean): T | undefined;
  /** The document with this `_id` (of any id type: string, number, ObjectID…). */
  findOne(id: unknown): T | undefined;
  /** Called after each change, with the collection already updated; returns a function that unsubscribes. */
  onChange(listener: (change: DocumentChange<T>) => void): () => void;
}

class LocalCollection implements ClientCollection {
  readonly docs = new Map<string, Document>();
  private readonly listeners = new ListenerSet<[DocumentChange]>();

  constructor(readonly name: string) {}

  get size(): number {
    return this.docs.size;
  }

  find(predicate?: (doc: Document) => boolean): Document[] {
    const found: Document[] = [];
    for (const doc of this.docs.values()) if (!predicate || predicate(doc)) found.push(doc);
    return found;
  }

  findOne(selector: unknown): Document | undefined {
    if (typeof selector !== 'function') return this.docs.get(idStringify(selector));
    for (const doc of this.docs.values()) if ((selector as (doc: Document) => boolean)(doc)) return doc;
    return undefined;
  }

  onChange(listener: (change: DocumentChange) => void): () => void {
    return this.listeners.add(listener);
  }

  apply(message: DocumentMessage): void {
    const change = applyDocumentMessage(this.docs, message);
    if (change) this.listeners.notify(change);
  }

  replace(next: Map<string, Document>): void {
    for (const change of replaceDocuments(this.docs, next)) this.listeners.notify(change);
  }
}

export class LocalStore {
  private readonly collections = new Map<string, LocalCollection>();

  collection(name: string): LocalCollection {
    let collection = this.collections.get(name);
    if (!collection) {
      collection = new LocalCollection(name);
      this.collections.set(name, collection);
    }
    return collection;
  }

  apply(message: DocumentMessage): void {
    this.collection(message.collection).apply(message);
  }

  /**
   * Makes the store hold exactly what `messages` build from nothing, notifying
   * only the differences: how the client switches to a new session's data.
   */
  reset(messages: readonly DocumentMessage[]): void {
    const next = new Map<string, Map<string, Document>>();
    for (const message of messages) {
      let docs = next.get(message.collection);
      if (!docs) next.set(message.collection, (docs = new Map()));
      applyDocumentMessage(docs, message);
    }
    for (const name of new Set([...this.collections.keys(), ...next.keys()])) {
      this.collection(name).replace(next.get(name) ?? new Map());
    }
  }
}
