/**
 * The shape of a query: which fields it tests and how (equality, `$in`,
 * range, ...), and its sort, never the values. Queries of one shape are served
 * by the same index, so the APM counts database work per shape and the index
 * advisor reasons about shapes. `{owner: 'x', at: {$gt: d}}` sorted by `at`
 * descending is `{at: range, owner: eq} sort {at: -1}` whatever `x` and `d` are.
 */

export type FieldKind = 'eq' | 'in' | 'range' | 'regex' | 'exists' | 'type' | 'ne' | 'array' | 'other';

export type SortKeys = ReadonlyArray<readonly [path: string, direction: 1 | -1]>;

export interface QueryShape {
  /** Stable text naming the shape (fields in name order with their kinds, then the sort). */
  readonly key: string;
  readonly fields: ReadonlyArray<readonly [field: string, kind: FieldKind]>;
  readonly sort: SortKeys;
  /** Why no single index can serve the query ($or, $where, $text, geo), when that is so. */
  readonly unindexable?: string;
  /** Looks documents up by `_id` (which is always indexed). */
  readonly byId: boolean;
}

/** How well an index serves a kind of condition: the better one wins when a field has several. */
const PREFERENCE: FieldKind[] = ['eq', 'in', 'range', 'regex', 'type', 'exists', 'array', 'ne', 'other'];

const KIND_OF_OPERATOR: Record<string, FieldKind> = {
  $eq: 'eq',
  $in: 'in',
  $gt: 'range',
  $gte: 'range',
  $lt: 'range',
  $lte: 'range',
  $regex: 'regex',
  $options: 'regex',
  $exists: 'exists',
  $type: 'type',
  $ne: 'ne',
  $nin: 'ne',
  $not: 'ne',
  $elemMatch: 'array',
  $all: 'array',
  $size: 'array',
};

const GEO = new Set(['$near', '$nearSphere', '$geoWithin', '$geoIntersects', '$within']);

function isOperatorObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return false;
  const keys = Object.keys(value);
  return keys.length > 0 && keys.every((k) => k.startsWith('$'));
}

function better(a: FieldKind | undefined, b: FieldKind): FieldKind {
  return a === undefined || PREFERENCE.indexOf(b) < PREFERENCE.indexOf(a) ? b : a;
}

interface Collected {
  fields: Map<string, FieldKind>;
  unindexable?: string;
}

function collect(selector: Record<string, unknown>, out: Collected): void {
  for (const key of Object.keys(selector)) {
    const condition = selector[key];
    if (key === '$and' && Array.isArray(condition)) {
      for (const part of condition) if (typeof part === 'object' && part !== null) collect(part as Record<string, unknown>, out);
      continue;
    }
    if (key === '$comment') continue;
    if (key.startsWith('$')) {
      out.unindexable ??= key === '$or' || key === '$nor' ? `the selector has ${key}` : `${key} needs the whole query`;
      continue;
    }
    let kind: FieldKind | undefined;
    if (condition instanceof RegExp) kind = 'regex';
    else if (isOperatorObject(condition)) {
      for (const operator of Object.keys(condition)) {
        if (GEO.has(operator)) out.unindexable ??= `${operator} needs a geospatial index`;
        kind = better(kind, KIND_OF_OPERATOR[operator] ?? 'other');
      }
    } else kind = 'eq';
    out.fields.set(key, better(out.fields.get(key), kind!));
  }
}

/**
 * Longest shape key kept as it is. Field names can come from a client (an app
 * that passes a filter on): past this, a shape is one per collection, so
 * made-up names cannot fill memory and `/metrics` with megabyte labels.
 */
const MAX_KEY_LENGTH = 1000;

/** The one shape of every query whose key would be longer than MAX_KEY_LENGTH. */
const TOO_LONG: QueryShape = {
  key: `{(fields too many or too long to name: over ${MAX_KEY_LENGTH} characters)}`,
  fields: [],
  sort: [],
  byId: false,
  unindexable: 'it tests or sorts by more fields than a shape names',
};

/** The shape of `selector` sorted by `sort`. */
export function queryShape(selector: Record<string, unknown> | undefined, sort?: SortKeys): QueryShape {
  const collected: Collected = { fields: new Map() };
  if (selector) collect(selector, collected);
  const fields = [...collected.fields].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const sortKeys = sort ?? [];
  let key = `{${fields.map(([f, k]) => `${f}: ${k}`).join(', ')}}`;
  if (sortKeys.length > 0) key += ` sort {${sortKeys.map(([f, d]) => `${f}: ${d}`).join(', ')}}`;
  if (key.length > MAX_KEY_LENGTH) return TOO_LONG;
  const id = collected.fields.get('_id');
  const shape: QueryShape = { key, fields, sort: sortKeys, byId: id === 'eq' || id === 'in' };
  return collected.unindexable ? { ...shape, unindexable: collected.unindexable } : shape;
}
