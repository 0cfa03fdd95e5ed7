/**
 * A local query as Meteor's client cursors offer it: `fetch`, `count`, and
 * `observeChanges` / `observe` with Meteor's callbacks (initial results are
 * delivered as additions before the call returns), plus, for UI bindings that
 * want the whole result list, `watch` and the `subscribe` / `getSnapshot` pair
 * React's useSyncExternalStore takes: the snapshot stays the same array until
 * the results change.
 */
import { idParse } from '../ddp/ids.js';
import type { Document } from './documents.js';
import { runQuery, project, type CompiledQuery } from './local-query.js';
import { QueryObserver, type ResultChange } from './query-observer.js';

export interface ObserveChangesCallbacks {
  added?(id: unknown, fields: Record<string, unknown>): void;
  /** Ordered form of `added`: `before` is the id of the next result, or null for the last. */
  addedBefore?(id: unknown, fields: Record<string, unknown>, before: unknown): void;
  /** `fields` holds the new values of the fields that changed; removed ones are `undefined`. */
  changed?(id: unknown, fields: Record<string, unknown>): void;
  movedBefore?(id: unknown, before: unknown): void;
  removed?(id: unknown): void;
}

export interface ObserveCallbacks<T> {
  added?(doc: T): void;
  addedAt?(doc: T, atIndex: number, before: unknown): void;
  changed?(doc: T, oldDoc: T): void;
  changedAt?(doc: T, oldDoc: T, atIndex: number): void;
  removed?(oldDoc: T): void;
  removedAt?(oldDoc: T, atIndex: number): void;
  movedTo?(doc: T, fromIndex: number, toIndex: number, before: unknown): void;
}

export interface ObserveHandle {
  stop(): void;
}

/** A live result list: `results` is replaced (never mutated) when it changes. */
export interface WatchHandle<T> extends ObserveHandle {
  readonly results: readonly T[];
}

/** What a cursor needs from its collection. */
export interface CursorSource {
  readonly docs: ReadonlyMap<string, Document>;
  /** Counts the collection's changes: an unchanged count means unchanged results. */
  readonly changes: number;
  /** Keeps `observer` refreshed until the returned function is called. */
  watch(observer: QueryObserver): () => void;
}

/**
 * The `_id` of a result, from the key it is stored under: the projected
 * document may leave `_id` out (`fields: { _id: 0 }`), and Meteor's callbacks
 * get the id whatever the projection.
 */
function idOrNull(id: string | null): unknown {
  return id === null ? null : idParse(id);
}

function withoutId(doc: Document): Record<string, unknown> {
  const { _id: _ignored, ...fields } = doc;
  return fields;
}

export class LocalCursor<T extends object = Document> {
  /** The results behind getSnapshot/subscribe/watch, kept live while anyone listens. */
  private snapshotObserver: QueryObserver | undefined;
  private snapshotAt = -1;
  private readonly listeners = new Set<() => void>();
  private stopSnapshot: (() => void) | undefined;

  constructor(
    private readonly query: CompiledQuery,
    private readonly source: CursorSource,
  ) {}

  fetch(): T[] {
    return runQuery(this.source.docs, this.query).map(([, doc]) => project(this.query, doc) as T);
  }

  count(): number {
    return runQuery(this.source.docs, this.query).length;
  }

  forEach(callback: (doc: T, index: number, cursor: this) => void): void {
    this.fetch().forEach((doc, index) => callback(doc, index, this));
  }

  map<R>(callback: (doc: T, index: number, cursor: this) => R): R[] {
    return this.fetch().map((doc, index) => callback(doc, index, this));
  }

  // Meteor 3's names, so code shared with the server (and stubs) reads the local copy as written there.
  fetchAsync(): Promise<T[]> {
    return Promise.resolve(this.fetch());
  }

  countAsync(): Promise<number> {
    return Promise.resolve(this.count());
  }

  async forEachAsync(callback: (doc: T, index: number, cursor: this) => unknown): Promise<void> {
    for (const [index, doc] of this.fetch().entries()) await callback(doc, index, this);
  }

  async mapAsync<R>(callback: (doc: T, index: number, cursor: this) => R | Promise<R>): Promise<R[]> {
    const results: R[] = [];
    for (const [index, doc] of this.fetch().entries()) results.push(await callback(doc, index, this));
    return results;
  }

  /** The results now: the same array as the last call unless they changed since. */
  readonly getSnapshot = (): readonly T[] => {
    this.snapshotObserver ??= new QueryObserver(this.source.docs, this.query, () => this.notify());
    if (!this.stopSnapshot && this.snapshotAt !== this.source.changes) {
      this.snapshotObserver.refresh();
      this.snapshotAt = this.source.changes;
    }
    return this.snapshotObserver.results as readonly T[];
  };

  /** Calls `listener` after each change of the results; returns the function that stops it. */
  readonly subscribe = (listener: () => void): (() => void) => {
    if (!this.stopSnapshot) {
      this.getSnapshot(); // brought up to date before anyone listens
      this.stopSnapshot = this.source.watch(this.snapshotObserver!);
    }
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size > 0 || !this.stopSnapshot) return;
      this.stopSnapshot();
      this.stopSnapshot = undefined;
      this.snapshotAt = -1;
    };
  };

  observeChanges(callbacks: ObserveChangesCallbacks): ObserveHandle {
    return this.observeResults((changes) => {
      for (const change of changes) {
        const id = idParse(change.id);
        switch (change.type) {
          case 'added':
            if (callbacks.addedBefore) callbacks.addedBefore(id, withoutId(change.doc), idOrNull(change.before));
            else callbacks.added?.(id, withoutId(change.doc));
            break;
          case 'moved':
            callbacks.movedBefore?.(id, idOrNull(change.before));
            break;
          case 'changed':
            callbacks.changed?.(id, change.fields);
            break;
          case 'removed':
            callbacks.removed?.(id);
            break;
        }
      }
    });
  }

  observe(callbacks: ObserveCallbacks<T>): ObserveHandle {
    const order: string[] = [];
    const indexBefore = (before: string | null) => (before === null ? order.length : order.indexOf(before));
    return this.observeResults((changes) => {
      for (const change of changes) {
        const doc = change.doc as T;
        switch (change.type) {
          case 'added': {
            const at = indexBefore(change.before);
            order.splice(at, 0, change.id);
            callbacks.addedAt?.(doc, at, idOrNull(change.before));
            callbacks.added?.(doc);
            break;
          }
          case 'moved': {
            const from = order.indexOf(change.id);
            order.splice(from, 1);
            const to = indexBefore(change.before);
            order.splice(to, 0, change.id);
            callbacks.movedTo?.(doc, from, to, idOrNull(change.before));
            break;
          }
          case 'changed':
            callbacks.changedAt?.(doc, change.previous as T, order.indexOf(change.id));
            callbacks.changed?.(doc, change.previous as T);
            break;
          case 'removed': {
            const at = order.indexOf(change.id);
            order.splice(at, 1);
            callbacks.removedAt?.(doc, at);
            callbacks.removed?.(doc);
            break;
          }
        }
      }
    });
  }

  /** Follows the whole result list: `listener` gets it after each change (not for the initial one). */
  watch(listener: (results: readonly T[]) => void): WatchHandle<T> {
    const stop = this.subscribe(() => listener(this.getSnapshot()));
    const results = this.getSnapshot;
    return {
      get results() {
        return results();
      },
      stop,
    };
  }

  private notify(): void {
    for (const listener of this.listeners) listener();
  }

  private observeResults(emit: (changes: readonly ResultChange[]) => void): ObserveHandle {
    const observer = new QueryObserver(this.source.docs, this.query, emit);
    observer.refresh();
    return { stop: this.source.watch(observer) };
  }
}
