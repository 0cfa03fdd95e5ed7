/** Selectors: Meteor's id shorthand, validation and compilation to a predicate (MongoDB semantics via mingo). */
import { mingoQuery } from './mingo.js';
import type { Document, Selector } from './types.js';

/**
 * Turns Meteor's shorthand (`find(id)`) into a selector object. A falsy
 * selector (`findOne(undefined)`, `removeAsync(null)`) selects nothing, as in
 * Meteor: an id that is missing must not reach every document. `find()` with
 * no selector at all selects everything: see {@link passedSelector}.
 */
export function normalizeSelector(selector: Selector | undefined | null): Document {
  if (!selector) return { _id: { $in: [] } }; // selects nothing, on every driver
  if (typeof selector === 'string' || typeof selector === 'number') return { _id: selector };
  if (typeof selector !== 'object' || Array.isArray(selector)) {
    throw new TypeError(`Invalid selector: ${String(selector)}`);
  }
  if (typeof (selector as { toHexString?: unknown }).toHexString === 'function') return { _id: selector };
  return selector as Document;
}

/** The selector of `find(selector?, options?)` given its arguments: every document when there are none. */
export function passedSelector<S>(args: readonly [selector?: S, ...rest: unknown[]]): S | Document | undefined {
  return args.length === 0 ? {} : args[0];
}

export interface Matcher {
  test(doc: Document): boolean;
  /** True for the empty selector: every document matches. */
  readonly matchesAll: boolean;
  /**
   * False when a change to one document can alter which *other* documents match
   * or when evaluation needs more than the document (`$where` with outside state,
   * `$near` ordering, `$text` scores): such queries must be re-run, not patched.
   */
  readonly incremental: boolean;
  /** Top-level fields the selector reads ('all' when that cannot be told). */
  readonly fields: ReadonlySet<string> | 'all';
}

/** Top-level document fields a selector depends on. */
export function selectorFields(selector: Document): Set<string> | 'all' {
  const out = new Set<string>();
  for (const [key, value] of Object.entries(selector)) {
    if (key === '$and' || key === '$or' || key === '$nor') {
      if (!Array.isArray(value)) return 'all';
      for (const clause of value as Document[]) {
        const inner = selectorFields(clause);
        if (inner === 'all') return 'all';
        for (const f of inner) out.add(f);
      }
    } else if (key.startsWith('$')) {
      return 'all'; // $where, $expr, $text, $comment...: anything may matter
    } else {
      out.add(key.split('.')[0]!);
    }
  }
  return out;
}

const NON_INCREMENTAL = new Set(['$where', '$near', '$nearSphere', '$text', '$expr']);

function usesOperator(value: unknown, operators: Set<string>): boolean {
  if (Array.isArray(value)) return value.some((v) => usesOperator(v, operators));
  if (value === null || typeof value !== 'object' || value instanceof Date || value instanceof RegExp) return false;
  for (const key of Object.keys(value)) {
    if (operators.has(key)) return true;
    if (usesOperator((value as Document)[key], operators)) return true;
  }
  return false;
}

/** One top-level field equal to a string, number or boolean: the field holds it, or holds an array with it. */
function equalityTest(field: string, value: string | number | boolean): (doc: Document) => boolean {
  return (doc) => {
    const actual = doc[field];
    return actual === value || (Array.isArray(actual) && actual.includes(value));
  };
}

/**
 * A selector of plain top-level equalities (`{_id: id}`, `{sessionId: s}`), the
 * commonest by far, tested without building a mingo query: every write by id
 * compiles one.
 */
function compilePlainEqualities(selector: Document): Matcher | undefined {
  const tests: Array<(doc: Document) => boolean> = [];
  for (const [field, value] of Object.entries(selector)) {
    if (field.startsWith('$') || field.includes('.') || !isIndexableValue(value)) return undefined;
    tests.push(equalityTest(field, value));
  }
  const fields = new Set(Object.keys(selector));
  const [only] = tests;
  return {
    test: tests.length === 1 ? only! : (doc) => tests.every((test) => test(doc)),
    matchesAll: false,
    incremental: true,
    fields,
  };
}

export function compileSelector(selector: Document): Matcher {
  if (Object.keys(selector).length === 0) return { test: () => true, matchesAll: true, incremental: true, fields: new Set() };
  const plain = compilePlainEqualities(selector);
  if (plain) return plain;
  let query: { test(doc: Document): boolean };
  try {
    query = mingoQuery(selector);
  } catch (error) {
    throw new Error(`Invalid selector ${JSON.stringify(selector)}: ${(error as Error).message}`, { cause: error });
  }
  return {
    test: (doc) => query.test(doc),
    matchesAll: false,
    incremental: !usesOperator(selector, NON_INCREMENTAL),
    fields: selectorFields(selector),
  };
}

/** The `_id` values a selector is restricted to, when it names them (`{_id: x}` or `{_id: {$in: [...]}}`). */
export function selectorIds(selector: Document): unknown[] | undefined {
  if (!('_id' in selector)) return undefined;
  const id = selector._id;
  if (id === null || typeof id !== 'object' || typeof (id as { toHexString?: unknown }).toHexString === 'function') {
    return [id];
  }
  const ops = id as Document;
  const keys = Object.keys(ops);
  if (keys.length === 1 && keys[0] === '$in' && Array.isArray(ops.$in)) return ops.$in as unknown[];
  if (keys.length === 1 && keys[0] === '$eq') return [ops.$eq];
  return undefined;
}

/** A value an equality index can key on: equal under MongoDB's rules exactly when `===` (NaN excluded). */
export function isIndexableValue(value: unknown): value is string | number | boolean {
  return typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && !Number.isNaN(value));
}

function equalityValues(constraint: unknown): unknown[] | undefined {
  if (isIndexableValue(constraint)) return [constraint];
  if (constraint === null || typeof constraint !== 'object' || Array.isArray(constraint) || constraint instanceof Date || constraint instanceof RegExp) return undefined;
  const ops = constraint as Document;
  const keys = Object.keys(ops);
  if (keys.length === 0 || !keys.every((key) => key.startsWith('$'))) return undefined; // a literal sub-document
  if ('$eq' in ops && isIndexableValue(ops.$eq)) return [ops.$eq];
  if (Array.isArray(ops.$in) && ops.$in.length > 0 && ops.$in.every(isIndexableValue)) return [...new Set(ops.$in as unknown[])];
  return undefined;
}

/**
 * Top-level fields every matching document must hold one of a few values in
 * (`{room: 'a'}`, `{room: {$in: [...]}}`, `$eq`, also inside a top-level `$and`):
 * field → those values. Only strings, numbers and booleans (a field holding an
 * array matches when one element does). `_id` is included with its ids as given
 * (ObjectIDs too); compare those with `idStringify`.
 */
export function selectorEqualities(selector: Document): Map<string, unknown[]> {
  const out = new Map<string, unknown[]>();
  const visit = (clause: Document): void => {
    for (const [key, constraint] of Object.entries(clause)) {
      if (key === '$and' && Array.isArray(constraint)) {
        for (const inner of constraint) if (inner && typeof inner === 'object') visit(inner as Document);
        continue;
      }
      if (key.startsWith('$') || key.includes('.')) continue;
      const values = key === '_id' ? selectorIds({ _id: constraint }) : equalityValues(constraint);
      if (!values || values.length === 0) continue;
      const known = out.get(key);
      // Two constraints on one field: either list is a sound index (the document must meet both); keep the shorter.
      if (!known || values.length < known.length) out.set(key, values);
    }
  };
  visit(selector);
  return out;
}
