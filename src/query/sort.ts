/** Sort specifiers in Meteor's accepted forms, compiled to a MongoDB-ordered comparator. */
import { compare, resolve } from 'mingo/util';
import type { Document, SortKeys, SortSpecifier } from './types.js';
import { idStringify } from '../ddp/ids.js';

export function normalizeSort(spec: SortSpecifier | undefined): SortKeys | undefined {
  if (spec === undefined) return undefined;
  const keys: Array<readonly [string, 1 | -1]> = [];
  const direction = (d: unknown): 1 | -1 => {
    if (d === 1 || d === 'asc') return 1;
    if (d === -1 || d === 'desc') return -1;
    throw new Error(`Invalid sort direction: ${JSON.stringify(d)}`);
  };
  if (Array.isArray(spec)) {
    for (const entry of spec as ReadonlyArray<unknown>) {
      if (typeof entry === 'string') keys.push([entry, 1]);
      else if (Array.isArray(entry) && typeof entry[0] === 'string') keys.push([entry[0], direction(entry[1])]);
      else throw new Error(`Invalid sort specifier entry: ${JSON.stringify(entry)}`);
    }
  } else if (typeof spec === 'object' && spec !== null) {
    for (const [path, d] of Object.entries(spec)) keys.push([path, direction(d)]);
  } else {
    throw new Error(`Invalid sort specifier: ${JSON.stringify(spec)}`);
  }
  return keys.length > 0 ? keys : undefined;
}

/**
 * What a document sorts by, as in MongoDB: a missing field as null; an array by
 * its smallest element ascending and largest descending, an empty one below null.
 */
function sortValue(doc: Document, path: string, dir: 1 | -1): unknown {
  const value = resolve(doc, path) as unknown;
  if (value === undefined) return null;
  if (!Array.isArray(value)) return value;
  if (value.length === 0) return undefined;
  let best: unknown = value[0];
  for (let i = 1; i < value.length; i++) {
    const c = compare(value[i], best);
    if ((dir === 1 && c < 0) || (dir === -1 && c > 0)) best = value[i];
  }
  return best;
}

export type Comparator = (a: Document, b: Document) => number;

export function compileSort(keys: SortKeys): Comparator {
  return (a, b) => {
    for (const [path, dir] of keys) {
      const c = compare(sortValue(a, path, dir), sortValue(b, path, dir));
      if (c !== 0) return c * dir;
    }
    return 0;
  };
}

/** Orders by the sort keys, then by `_id` so that ties are broken the same way every time. */
export function compileStableSort(keys: SortKeys): Comparator {
  const bySort = compileSort(keys);
  return (a, b) => {
    const c = bySort(a, b);
    if (c !== 0) return c;
    const x = idStringify(a._id);
    const y = idStringify(b._id);
    return x < y ? -1 : x > y ? 1 : 0;
  };
}

/** Whether a sort names `$natural`: the database's own order (insertion order on the embedded store), which no document field holds. */
export function sortsNaturally(keys: SortKeys | undefined): boolean {
  return keys?.some(([path]) => path === '$natural') ?? false;
}
