/**
 * A query over a collection. Reading it runs the query once; observing it (or
 * returning it from a publication) attaches to the shared live query.
 */
import { clone } from '../ddp/ejson.js';
import { idParse } from '../ddp/ids.js';
import { createLogger } from '../log.js';
import type { DocChange, Fields } from '../reactive/doc-change.js';
import type { LiveQueryObserver } from '../reactive/live-query.js';
import type { ObserveHandle } from '../reactive/registry.js';
import { normalizeSort } from '../query/sort.js';
import type { Collection } from './collection.js';
import type { Document, FindOptions, QuerySpec } from '../data/types.js';

/** Callbacks may be async; what one throws or rejects with is logged (see `guarded`). */
export interface ObserveChangesCallbacks {
  added?(id: unknown, fields: Fields): unknown;
  changed?(id: unknown, fields: Fields): unknown;
  removed?(id: unknown): unknown;
}

export interface ObserveCallbacks<T> {
  added?(doc: T): unknown;
  changed?(newDoc: T, oldDoc: T): unknown;
  removed?(oldDoc: T): unknown;
}

const log = createLogger('observe');

/**
 * Runs an app's observe callback: what it throws, or rejects with, is logged and
 * goes no further. Thrown into the live query, it kept the change from the
 * query's other observers (other connections' subscriptions) for good; a
 * rejection left unhandled stopped the server.
 */
function guarded(collection: string, callback: () => unknown): void {
  const failed = (error: unknown) => log.error('an observe callback failed', { collection, error });
  try {
    const result = callback();
    if (result instanceof Promise) result.catch(failed);
  } catch (error) {
    failed(error);
  }
}

function checkCount(value: unknown, what: string): number | undefined {
  if (value === undefined || value === 0) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) throw new Error(`${what} must be a non-negative integer`);
  return value;
}

export class Cursor<T extends object = Document> {
  readonly spec: QuerySpec;

  constructor(
    readonly collection: Collection<T>,
    selector: Document,
    options: FindOptions,
  ) {
    const projection = options.projection ?? options.fields;
    this.spec = {
      collection: collection.name,
      selector,
      sort: normalizeSort(options.sort),
      skip: checkCount(options.skip, 'skip'),
      limit: checkCount(options.limit, 'limit'),
      projection: projection && Object.keys(projection).length > 0 ? projection : undefined,
    };
  }

  get collectionName(): string {
    return this.collection.name;
  }

  async fetchAsync(): Promise<T[]> {
    const { driver } = await this.collection.resolve();
    const { docs } = await driver.find(this.spec);
    // Drivers share their documents with live queries; callers get their own copies.
    return docs.map((doc) => clone(doc) as T);
  }

  async countAsync(): Promise<number> {
    const { driver } = await this.collection.resolve();
    return driver.count(this.spec);
  }

  async forEachAsync(callback: (doc: T, index: number) => void | Promise<void>): Promise<void> {
    const docs = await this.fetchAsync();
    for (let i = 0; i < docs.length; i++) await callback(docs[i]!, i);
  }

  async mapAsync<R>(callback: (doc: T, index: number) => R | Promise<R>): Promise<R[]> {
    const docs = await this.fetchAsync();
    const out: R[] = [];
    for (let i = 0; i < docs.length; i++) out.push(await callback(docs[i]!, i));
    return out;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (const doc of await this.fetchAsync()) yield doc;
  }

  /** Attaches an observer to the live query for this cursor (what publications use). */
  async observeLive(observer: LiveQueryObserver): Promise<ObserveHandle> {
    const { database } = await this.collection.resolve();
    return database.liveQueries.observe(this.spec, observer);
  }

  /** Meteor's `observeChangesAsync`: the initial result as `added` calls, then every change. */
  async observeChangesAsync(callbacks: ObserveChangesCallbacks): Promise<{ stop(): void }> {
    const collection = this.collectionName;
    const handle = await this.observeLive({
      onChange: (change: DocChange) =>
        guarded(collection, () => {
          const id = idParse(change.key);
          if (change.kind === 'added') return callbacks.added?.(id, clone(change.after!));
          if (change.kind === 'removed') return callbacks.removed?.(id);
          const fields = clone(change.fields ?? {});
          for (const key of change.cleared ?? []) fields[key] = undefined;
          return callbacks.changed?.(id, fields);
        }),
    });
    return { stop: () => handle.stop() };
  }

  /** Meteor's `observeAsync`: whole documents rather than field changes. */
  async observeAsync(callbacks: ObserveCallbacks<T>): Promise<{ stop(): void }> {
    const whole = (key: string, fields: Fields): T => ({ _id: idParse(key), ...clone(fields) }) as unknown as T;
    const collection = this.collectionName;
    const handle = await this.observeLive({
      onChange: (change: DocChange) =>
        guarded(collection, () => {
          if (change.kind === 'added') return callbacks.added?.(whole(change.key, change.after!));
          if (change.kind === 'changed') return callbacks.changed?.(whole(change.key, change.after!), whole(change.key, change.before!));
          return callbacks.removed?.(whole(change.key, change.before!));
        }),
    });
    return { stop: () => handle.stop() };
  }
}
