/** The shapes of a query: selectors, sorts, projections and find options, shared by the server and the client. */

export type Document = Record<string, unknown>;

/** A MongoDB selector, or an id as shorthand for `{_id: id}`. */
export type Selector = Document | string | number | { toHexString(): string };

export type SortDirection = 1 | -1;
/** Meteor accepts `{a: 1, b: -1}`, `[['a', 'asc'], ['b', 'desc']]` and `['a', ['b', 'desc']]`. */
export type SortSpecifier = Record<string, SortDirection> | ReadonlyArray<string | readonly [string, 'asc' | 'desc' | SortDirection]>;
export type SortKeys = ReadonlyArray<readonly [path: string, direction: SortDirection]>;

export type Projection = Record<string, unknown>;

export interface FindOptions {
  sort?: SortSpecifier;
  skip?: number;
  limit?: number;
  /** Meteor's name for `projection`. */
  fields?: Projection;
  projection?: Projection;
}

/** A query in normal form: what drivers execute and live queries are keyed by. */
export interface QuerySpec {
  collection: string;
  selector: Document;
  sort?: SortKeys;
  skip?: number;
  limit?: number;
  projection?: Projection;
}
