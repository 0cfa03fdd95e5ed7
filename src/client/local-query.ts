/**
 * A query over a client collection's documents, compiled once: the selector
 * (a Mongo selector, an id, or a predicate), sort, skip, limit and
 * projection, with the server's semantics because the compilers are the
 * server's own (src/query/). Results come in the order the query asks for;
 * without a sort, in the order the documents arrived.
 */
import { equals } from '../ddp/ejson.js';
import { compileProjection, type Projector } from '../query/projection.js';
import { compileSelector, normalizeSelector, selectorIds } from '../query/selector.js';
import { compileStableSort, normalizeSort, type Comparator } from '../query/sort.js';
import type { FindOptions, Selector } from '../query/types.js';
import { idStringify } from '../ddp/ids.js';
import type { Document } from './documents.js';

/** What `find` accepts: a Mongo selector, an `_id` (any id type), or a predicate. */
export type LocalSelector<T> = Selector | ((doc: T) => boolean) | null | undefined;

export type { FindOptions };

export interface CompiledQuery {
  /** Whether a document belongs to the results (before skip and limit). */
  matches(doc: Document): boolean;
  /** The string ids the selector is restricted to, when it names them. */
  readonly ids: readonly string[] | undefined;
  readonly comparator: Comparator | undefined;
  readonly skip: number;
  readonly limit: number;
  readonly projector: Projector | undefined;
}

function nonNegative(value: number | undefined, name: string): number {
  if (value === undefined) return 0;
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer, got ${String(value)}`);
  return value;
}

export function compileQuery<T>(selector: LocalSelector<T>, options: FindOptions = {}): CompiledQuery {
  const projection = options.projection ?? options.fields;
  const sort = normalizeSort(options.sort);
  const shared = {
    comparator: sort ? compileStableSort(sort) : undefined,
    skip: nonNegative(options.skip, 'skip'),
    limit: nonNegative(options.limit, 'limit'),
    projector: projection ? compileProjection(projection) : undefined,
  };
  if (typeof selector === 'function') {
    const predicate = selector as (doc: Document) => boolean;
    return { ...shared, matches: (doc) => predicate(doc), ids: undefined };
  }
  const normalized = normalizeSelector(selector);
  const matcher = compileSelector(normalized);
  const ids = selectorIds(normalized);
  return { ...shared, matches: (doc) => matcher.test(doc), ids: ids?.map(idStringify) };
}

/** A document of the store with its DDP id (the key it is stored under). */
export type Keyed = readonly [id: string, doc: Document];

/** The documents of `docs` the query selects, sorted, skipped and limited (not yet projected). */
export function runQuery(docs: ReadonlyMap<string, Document>, query: CompiledQuery): Keyed[] {
  let found: Keyed[] = [];
  if (query.ids) {
    for (const id of new Set(query.ids)) {
      const doc = docs.get(id);
      if (doc && query.matches(doc)) found.push([id, doc]);
    }
  } else {
    for (const entry of docs) if (query.matches(entry[1])) found.push(entry);
  }
  const { comparator } = query;
  if (comparator) found.sort((a, b) => comparator(a[1], b[1]));
  if (query.skip > 0 || query.limit > 0) {
    found = found.slice(query.skip, query.limit > 0 ? query.skip + query.limit : undefined);
  }
  return found;
}

/** `doc` as the query returns it: projected, or the store's own (read-only, never mutated) object. */
export function project(query: CompiledQuery, doc: Document): Document {
  return query.projector ? (query.projector.apply(doc) as Document) : doc;
}

/** The top-level fields that differ between two versions of a document; removed ones are `undefined`. */
export function changedFields(before: Document, after: Document): Record<string, unknown> | undefined {
  let fields: Record<string, unknown> | undefined;
  for (const key of Object.keys(after)) {
    if (key === '_id') continue;
    if (!Object.hasOwn(before, key) || !equals(before[key], after[key])) (fields ??= {})[key] = after[key];
  }
  for (const key of Object.keys(before)) if (!Object.hasOwn(after, key)) (fields ??= {})[key] = undefined;
  return fields;
}
