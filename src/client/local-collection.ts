/**
 * The client's copy of one collection: the documents the server sent (and
 * the writes of method stubs), answered with Mongo queries, and followed by
 * `onChange` listeners and by observers of local queries. Documents are never
 * mutated, only replaced, so results can be compared by identity.
 *
 * Writes (`insert`, `update`, `remove`) are allowed only while a method stub
 * runs: they are the stub's guess at what the server will do, undone or
 * replaced when the method's `updated` arrives (see server-documents.ts).
 */
import { clone } from '../ddp/ejson.js';
import { idStringify } from '../ddp/ids.js';
import { applyModifier, assertValidDocument, buildUpsert, parseModifier, upsertDrawsId } from '../query/modifier.js';
import { normalizeSelector, passedSelector } from '../query/selector.js';
import type { Selector } from '../query/types.js';
import { ClientErrors } from './client-errors.js';
import {
  applyDocumentMessage,
  replaceDocuments,
  type Document,
  type DocumentChange,
  type DocumentMessage,
} from './documents.js';
import { ListenerSet } from './emitter.js';
import { changedFields, compileQuery, project, runQuery, type FindOptions, type LocalSelector } from './local-query.js';
import { LocalCursor } from './local-cursor.js';
import type { QueryObserver } from './query-observer.js';

/** The method stub that is running, as collections see it. */
export interface ActiveStub {
  /** The `_id` an insert without one gets: from the method's random stream, as on the server. */
  newId(collection: string): string;
  /** Called before the stub first changes a document (with its version before the change). */
  willWrite(collection: string, id: string, original: Document | undefined): void;
}

/** What a collection shares with the rest of the client's store. */
export interface CollectionHost {
  /** The running stub, if any. */
  activeStub(): ActiveStub | undefined;
  /** While true, observers are refreshed once at the end (a reset, a method's documents settling). */
  readonly batch: { depth: number; dirty: Set<QueryObserver> };
}

export interface UpdateOptions {
  multi?: boolean;
  upsert?: boolean;
}

/** What an upsert did, as the server's upsertAsync says it. */
export interface UpsertResult {
  numberAffected: number;
  /** The `_id` of the document inserted, when nothing matched. */
  insertedId?: unknown;
}

export class LocalCollection<T extends object = Document> {
  private readonly docs = new Map<string, Document>();
  /** Counts changes, so that a cursor knows when its results may differ. */
  private changeCount = 0;
  private readonly listeners = new ListenerSet<[DocumentChange<T>]>();
  private readonly observers = new Set<QueryObserver>();

  constructor(
    readonly name: string,
    private readonly host: CollectionHost,
  ) {}

  get size(): number {
    return this.docs.size;
  }

  /** The documents a selector (Mongo selector, `_id` or predicate) selects, in query order. */
  find(...args: [selector?: LocalSelector<T>, options?: FindOptions]): T[] {
    const query = compileQuery(passedSelector(args), args[1]);
    return runQuery(this.docs, query).map(([, doc]) => project(query, doc) as T);
  }

  /** The first document a selector selects (with the options' sort and skip). */
  findOne(...args: [selector?: LocalSelector<T>, options?: Omit<FindOptions, 'limit'>]): T | undefined {
    return this.find(passedSelector(args), { ...args[1], limit: 1 })[0];
  }

  /** Meteor 3's name for findOne, for code shared with the server (the local copy answers at once). */
  findOneAsync(...args: [selector?: LocalSelector<T>, options?: Omit<FindOptions, 'limit'>]): Promise<T | undefined> {
    return settled(() => this.findOne(...args));
  }

  /** A query to fetch, count and observe. */
  cursor(...args: [selector?: LocalSelector<T>, options?: FindOptions]): LocalCursor<T> {
    const changes = () => this.changeCount;
    return new LocalCursor<T>(compileQuery(passedSelector(args), args[1]), {
      docs: this.docs,
      get changes() {
        return changes();
      },
      watch: (observer) => this.watch(observer),
    });
  }

  /** Called after each change, with the collection already updated; returns a function that unsubscribes. */
  onChange(listener: (change: DocumentChange<T>) => void): () => void {
    return this.listeners.add(listener);
  }

  // ---- writes of method stubs ----

  insert(doc: Omit<T, '_id'> & { _id?: unknown }): string {
    const stub = this.stub('insert');
    const copy = clone(doc) as Document;
    assertValidDocument(copy);
    copy._id ??= stub.newId(this.name);
    const id = idStringify(copy._id);
    if (this.docs.has(id)) throw ClientErrors.duplicateId({ id: JSON.stringify(copy._id), collection: this.name });
    stub.willWrite(this.name, id, undefined);
    const { _id, ...fields } = copy;
    this.set(id, { _id, ...fields });
    return _id as string;
  }

  /** Applies a modifier (`$set`, `$inc`, ...) or a replacement; returns how many documents matched. */
  update(selector: Selector, modifier: Record<string, unknown>, options: UpdateOptions = {}): number {
    return this.upsertOrUpdate(selector, modifier, options).numberAffected;
  }

  /** Updates, or inserts if nothing matches (Meteor's upsert): how many documents matched (or 1 inserted), and the inserted `_id`. */
  upsert(selector: Selector, modifier: Record<string, unknown>, options: Omit<UpdateOptions, 'upsert'> = {}): UpsertResult {
    return this.upsertOrUpdate(selector, modifier, { ...options, upsert: true });
  }

  private upsertOrUpdate(selector: Selector, modifier: Record<string, unknown>, options: UpdateOptions): UpsertResult {
    const stub = this.stub('update');
    const parsed = parseModifier(modifier);
    const normalized = normalizeSelector(selector);
    // Drawn whether or not a document matches, as on the server: the id streams stay in step.
    const insertedId = options.upsert && upsertDrawsId(selector, normalized) ? stub.newId(this.name) : undefined;
    const found = runQuery(this.docs, compileQuery(normalized, options.multi ? {} : { limit: 1 }));
    if (found.length === 0 && options.upsert) {
      const doc = buildUpsert(normalized, parsed, insertedId) as Document;
      this.insertWith(stub, doc);
      return { numberAffected: 1, insertedId: doc._id };
    }
    for (const [id, doc] of found) {
      const next = applyModifier(doc, parsed, { selector: normalized, inserting: false }) as Document;
      if (next === doc) continue;
      stub.willWrite(this.name, id, doc);
      this.set(id, next);
    }
    // Those matched, changed or not, as the server counts them.
    return { numberAffected: found.length };
  }

  /** Removes the documents a selector selects; returns how many. */
  remove(selector: Selector): number {
    const stub = this.stub('remove');
    const found = runQuery(this.docs, compileQuery(selector));
    for (const [id, doc] of found) {
      stub.willWrite(this.name, id, doc);
      this.set(id, undefined);
    }
    return found.length;
  }

  /** Meteor 3's names for the same writes (a stub's writes are local, so they are done at once). */
  insertAsync(doc: Omit<T, '_id'> & { _id?: unknown }): Promise<string> {
    return settled(() => this.insert(doc));
  }

  updateAsync(selector: Selector, modifier: Record<string, unknown>, options?: UpdateOptions): Promise<number> {
    return settled(() => this.update(selector, modifier, options));
  }

  upsertAsync(selector: Selector, modifier: Record<string, unknown>, options?: Omit<UpdateOptions, 'upsert'>): Promise<UpsertResult> {
    return settled(() => this.upsert(selector, modifier, options));
  }

  removeAsync(selector: Selector): Promise<number> {
    return settled(() => this.remove(selector));
  }

  // ---- the store's side ----

  /** The document stored under a DDP id. */
  get(id: string): Document | undefined {
    return this.docs.get(id);
  }

  /** Applies a data message from the server. */
  apply(message: DocumentMessage): void {
    const change = applyDocumentMessage(this.docs, message);
    if (change) this.changed(change);
  }

  /** Puts `doc` under `id` (undefined removes it), as a stub wrote it or a settled method left it. */
  set(id: string, doc: Document | undefined): void {
    const current = this.docs.get(id);
    if (!doc) {
      if (!current) return;
      this.docs.delete(id);
      this.changed({ type: 'removed', id, doc: current });
    } else if (!current) {
      this.docs.set(id, doc);
      this.changed({ type: 'added', id, doc });
    } else {
      const fields = changedFields(current, doc);
      if (!fields) return; // the same content: keep the object a UI may hold
      this.docs.set(id, doc);
      this.changed({ type: 'changed', id, doc, previous: current, fields });
    }
  }

  /** Makes the collection hold exactly `next`, notifying only the differences. */
  replaceAll(next: Map<string, Document>): void {
    for (const change of replaceDocuments(this.docs, next)) this.changed(change);
  }

  private insertWith(stub: ActiveStub, doc: Document): void {
    const id = idStringify(doc._id);
    stub.willWrite(this.name, id, this.docs.get(id));
    this.set(id, doc);
  }

  private stub(operation: string): ActiveStub {
    const stub = this.host.activeStub();
    if (!stub) throw ClientErrors.writeOutsideStub({ operation, collection: this.name });
    return stub;
  }

  private watch(observer: QueryObserver): () => void {
    this.observers.add(observer);
    return () => {
      this.observers.delete(observer);
      this.host.batch.dirty.delete(observer);
    };
  }

  private changed(change: DocumentChange): void {
    this.changeCount++;
    const { batch } = this.host;
    for (const observer of this.observers) {
      if (!observer.affectedBy(change)) continue;
      if (batch.depth > 0) batch.dirty.add(observer);
      else observer.refresh();
    }
    this.listeners.notify(change as DocumentChange<T>);
  }
}

function settled<R>(write: () => R): Promise<R> {
  try {
    return Promise.resolve(write());
  } catch (error) {
    return Promise.reject(error as Error);
  }
}
