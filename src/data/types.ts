/** Shapes shared by the collection API, its drivers and the live queries. */

export type { Document, Selector, SortDirection, SortSpecifier, SortKeys, Projection, FindOptions, QuerySpec } from '../query/types.js';

export interface UpdateOptions {
  multi?: boolean;
  upsert?: boolean;
  /** The `_id` an upsert inserts with (decided by the caller, so method stubs agree). */
  insertedId?: unknown;
}

export interface UpdateResult {
  numberAffected: number;
  insertedId?: unknown;
}

export interface IndexOptions {
  name?: string;
  unique?: boolean;
  sparse?: boolean;
}

export type IndexKeys = Record<string, 1 | -1>;
