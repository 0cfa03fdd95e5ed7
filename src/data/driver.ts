/**
 * The storage seam: the collection API talks to a driver, never to a database
 * directly. Implementations: the embedded store and MongoDB. A parity suite
 * runs the same tests against each.
 *
 * Documents a driver returns are shared with its cache and with live queries:
 * callers must not mutate them (the collection API clones before handing them
 * to application code).
 */
import { DDPError, defineError, defineThrownError } from '../ddp/errors.js';
import type { IndexDescription, QueryPlan } from '../metrics/database-stats.js';
import type { ChangeSource } from './change-source.js';
import type { Document, IndexKeys, IndexOptions, QuerySpec, UpdateOptions, UpdateResult } from './types.js';

/** What a write returns so that its delivery to live queries can be awaited (`ChangeSource.delivered`). */
export interface WriteOutcome {
  token: unknown;
}

export interface QueryResult {
  docs: Document[];
  /** The change seq these results reflect exactly, when the driver knows it (lets live queries skip older events). */
  position?: number;
  /** How the query ran (index used, documents examined), when the driver knows: the index advisor reads it. */
  plan?: QueryPlan;
}

export type { IndexDescription, QueryPlan };

export interface CollectionDriver {
  readonly name: string;
  insert(doc: Document): Promise<WriteOutcome>;
  update(selector: Document, modifier: Document, options: UpdateOptions): Promise<UpdateResult & WriteOutcome>;
  remove(selector: Document): Promise<{ removed: number } & WriteOutcome>;
  find(query: QuerySpec): Promise<QueryResult>;
  count(query: QuerySpec): Promise<number>;
  createIndex(keys: IndexKeys, options?: IndexOptions): Promise<string>;
  dropIndex(name: string): Promise<void>;
  /** The collection's indexes, `_id_` included (empty when the collection does not exist). */
  listIndexes(): Promise<IndexDescription[]>;
  /** How the database would run `query`, for the index advisor (asked once per query shape); absent when the driver reports plans with every find. */
  explain?(query: QuerySpec): Promise<QueryPlan | undefined>;
  /** Removes every document and index of the collection. */
  drop(): Promise<void>;
}

export interface StorageDriver {
  /** `embedded` or `mongo`: shown in logs and metrics. */
  readonly kind: string;
  readonly changes: ChangeSource;
  collection(name: string): CollectionDriver;
  /** Why the database cannot take writes now (for /health), or undefined when it can. */
  problem?(): string | undefined;
  close(): Promise<void>;
}

const DUPLICATE_KEY = defineThrownError('DUPLICATE_KEY', 11000, 'E11000 duplicate key error collection: {collection} index: {index} dup key: {key}');

/**
 * A duplicate key on a unique index: MongoDB's E11000, same code and message
 * shape, and the fields MongoDB's driver gives it: `keyValue` (the key taken,
 * as `{field: value}`) and `keyPattern` (the index's keys).
 */
export class DuplicateKeyError extends Error {
  readonly code = DUPLICATE_KEY.code;
  readonly keyValue: Document;
  readonly keyPattern: IndexKeys;
  constructor(
    collection: string,
    readonly index: string,
    readonly key: Document,
    keyPattern: IndexKeys,
  ) {
    super(`E11000 duplicate key error collection: ${collection} index: ${index} dup key: ${JSON.stringify(key)}`);
    this.name = 'DuplicateKeyError';
    this.keyValue = key;
    this.keyPattern = { ...keyPattern }; // the index's own stays out of reach
  }
}

const UNAVAILABLE = defineError('DATABASE_UNAVAILABLE', 503, 'Database unavailable');

/**
 * The database cannot be reached (down, restarting, network gone). Client-safe:
 * a method that hits it answers 503 "Database unavailable", and the client may retry.
 */
export class DatabaseUnavailableError extends DDPError {
  constructor(
    /** What the driver said; for the server's log, not for clients. */
    readonly detail: string,
    cause?: unknown,
  ) {
    super(UNAVAILABLE.code, UNAVAILABLE.reason);
    this.name = 'DatabaseUnavailableError';
    if (cause !== undefined) (this as { cause?: unknown }).cause = cause;
  }
}
