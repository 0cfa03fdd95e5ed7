/**
 * Document and update validation, and the building of updated and upserted
 * documents with MongoDB's rules on top of mingo's update operators. Stored
 * documents are never mutated: an update works on a clone.
 */
import { EJSON } from '../ddp/ejson.js';
import type { Document } from './types.js';
import { mingoUpdate, mingoUpdateAll } from './mingo.js';
import { isOperatorObject, isPlainObject } from './values.js';

const OPERATORS = new Set([
  '$set', '$unset', '$inc', '$mul', '$min', '$max', '$push', '$addToSet',
  '$pull', '$pullAll', '$pop', '$rename', '$bit', '$currentDate', '$setOnInsert',
]);
const NUMERIC_OPERATORS = new Set(['$inc', '$mul']);
const ARRAY_OPERATORS = new Set(['$push', '$addToSet', '$pull', '$pullAll', '$pop']);
/** Operators whose paths never create a field ($rename's are its sources): a scalar on the way is no error. */
const NON_CREATING_OPERATORS = new Set(['$unset', '$pull', '$pullAll', '$pop', '$rename']);

export type Modifier =
  | { kind: 'replace'; doc: Document }
  | { kind: 'operators'; ops: Record<string, Document>; positional: boolean };

const MOD_ON_ID = 'Mod on _id not allowed';

/** A value in an error message, cut at 200 characters: an update refused over a 10 MB value is one short line, not 10 MB of log. */
function describe(value: unknown): string {
  const text = EJSON.stringify(value);
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/** Top-level field names must not start with `$` or contain `.` (they would be read as operators or paths). */
export function assertValidDocument(doc: Document): void {
  if (!isPlainObject(doc)) throw new Error(`A document must be a plain object, got ${describe(doc)}`);
  for (const key of Object.keys(doc)) {
    if (key.startsWith('$') || key.includes('.')) {
      throw new Error(`Invalid field name ${JSON.stringify(key)}: field names cannot start with '$' or contain '.'`);
    }
  }
}

/** Classifies and validates a modifier once per update call; the result holds a private clone of it. */
export function parseModifier(modifier: Document): Modifier {
  if (!isPlainObject(modifier)) throw new Error(`An update modifier must be an object, got ${describe(modifier)}`);
  const keys = Object.keys(modifier);
  const operators = keys.filter((key) => key.startsWith('$'));
  if (operators.length === 0) {
    assertValidDocument(modifier);
    return { kind: 'replace', doc: EJSON.clone(modifier) };
  }
  if (operators.length !== keys.length) {
    throw new Error(`An update modifier cannot mix operators and fields: ${describe(modifier)}`);
  }
  let positional = false;
  for (const op of operators) {
    if (!OPERATORS.has(op)) throw new Error(`Unknown update operator ${op} in ${describe(modifier)}`);
    const args = modifier[op];
    if (!isPlainObject(args)) throw new Error(`${op} needs an object of fields, got ${describe(args)}`);
    for (const [path, arg] of Object.entries(args)) {
      if (NUMERIC_OPERATORS.has(op) && typeof arg !== 'number') {
        throw new Error(`${op} needs a number for ${path}, got ${describe(arg)}`);
      }
      if (path.split('.').some((part) => part.startsWith('$'))) positional = true;
    }
  }
  return { kind: 'operators', ops: EJSON.clone(modifier) as Record<string, Document>, positional };
}

type Lookup = { value: unknown } | { blockedAt: string; blocker: unknown };

/** The value at a dotted path, or the non-container that stops the path from being created. */
function lookup(doc: Document, path: string): Lookup {
  const parts = path.split('.');
  let current: unknown = doc;
  for (let i = 0; i < parts.length; i++) {
    if (current === undefined) return { value: undefined };
    const part = parts[i]!;
    if (Array.isArray(current) && /^\d+$/.test(part)) current = current[Number(part)];
    else if (isPlainObject(current)) current = current[part];
    else return { blockedAt: parts.slice(0, i).join('.'), blocker: current };
  }
  return { value: current };
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (value instanceof Date) return 'date';
  return typeof value === 'object' ? (isPlainObject(value) ? 'object' : (value.constructor?.name ?? 'object')) : typeof value;
}

/** The type errors MongoDB reports and mingo silently skips. */
function checkTargets(doc: Document, ops: Record<string, Document>): void {
  for (const [op, args] of Object.entries(ops)) {
    for (const path of Object.keys(args)) {
      if (path.includes('$')) continue; // positional paths are resolved by mingo
      const found = lookup(doc, path);
      if ('blockedAt' in found) {
        if (NON_CREATING_OPERATORS.has(op)) continue;
        throw new Error(`Cannot create field '${path}' in element {${found.blockedAt}: ${describe(found.blocker)}}`);
      }
      const { value } = found;
      if (value === undefined) continue;
      if (NUMERIC_OPERATORS.has(op) && typeof value !== 'number') {
        throw new Error(`Cannot apply ${op} to field '${path}' of non-numeric type ${typeName(value)}`);
      }
      if (ARRAY_OPERATORS.has(op) && !Array.isArray(value)) {
        throw new Error(`Cannot apply ${op} to field '${path}' of non-array type ${typeName(value)}`);
      }
    }
  }
}

const isIdPath = (path: string): boolean => path === '_id' || path.startsWith('_id.');

/**
 * The operators to run on `doc`: `$setOnInsert` joins `$set` only when
 * inserting, and `$set: {_id}` is dropped when it keeps the id. Any other
 * operation on `_id` is an error.
 */
function effectiveOperators(doc: Document, ops: Record<string, Document>, inserting: boolean): Record<string, Document> {
  const { $setOnInsert, ...rest } = ops;
  const out: Record<string, Document> = { ...rest };
  if (inserting && $setOnInsert) {
    for (const path of Object.keys($setOnInsert)) {
      if (rest.$set && path in rest.$set) throw new Error(`Updating the path '${path}' would create a conflict at '${path}'`);
    }
    out.$set = { ...rest.$set, ...$setOnInsert };
  }
  for (const [op, args] of Object.entries(out)) {
    for (const path of Object.keys(args)) {
      if (!isIdPath(path)) continue;
      if (op !== '$set' || path !== '_id' || !EJSON.equals(args[path], doc._id)) throw new Error(MOD_ON_ID);
      const { _id: _kept, ...others } = args;
      out[op] = others;
    }
  }
  return out;
}

/**
 * `$addToSet` as the `$push` of the values its array lacks. mingo's compares the
 * array deduplicated with its old length: one already holding a duplicate
 * (`[a, a]`) took no new value, or lost its duplicates, where MongoDB keeps them
 * and adds the value. A document is there only with the same fields in the same
 * order, as MongoDB (and Meteor) compare them. Positional paths and non-arrays
 * stay with mingo (and checkTargets).
 */
function addToSetAsPush(doc: Document, ops: Record<string, Document>): Record<string, Document> {
  const { $addToSet, ...rest } = ops;
  if (!$addToSet) return ops;
  const kept: Document = {};
  const push: Document = {};
  for (const [path, arg] of Object.entries($addToSet)) {
    const found = lookup(doc, path);
    const current = 'value' in found ? found.value : undefined;
    const values = isPlainObject(arg) && '$each' in arg ? arg.$each : [arg];
    if (path.includes('$') || (rest.$push && path in rest.$push) || !Array.isArray(values) || (current !== undefined && !Array.isArray(current))) {
      kept[path] = arg;
      continue;
    }
    const existing = (current as unknown[] | undefined) ?? [];
    const missing: unknown[] = [];
    for (const value of values) {
      const holds = (list: readonly unknown[]) => list.some((x) => EJSON.equals(x, value, { keyOrderSensitive: true }));
      if (!holds(existing) && !holds(missing)) missing.push(value);
    }
    if (current === undefined || missing.length > 0) push[path] = { $each: missing };
  }
  const out: Record<string, Document> = { ...rest };
  if (Object.keys(push).length > 0) out.$push = { ...rest.$push, ...push };
  if (Object.keys(kept).length > 0) out.$addToSet = kept;
  return out;
}

/**
 * A `$push` with `$sort`, `$slice` or `$position` to a field the document lacks:
 * MongoDB makes the array, then applies them (`{$each: [3, 1], $sort: 1}`
 * stores [1, 3]); mingo stored `$each` as given. Such fields start as [] here.
 * Returns whether it started one.
 */
function startPushedArrays(doc: Document, ops: Record<string, Document>): boolean {
  let started = false;
  for (const [path, arg] of Object.entries(ops.$push ?? {})) {
    if (path.includes('$') || !isPlainObject(arg) || !('$each' in arg) || Object.keys(arg).length === 1) continue;
    const found = lookup(doc, path);
    if ('value' in found && found.value === undefined) started = mingoUpdate(doc, { $set: { [path]: [] } }).length > 0 || started;
  }
  return started;
}

export interface ApplyContext {
  /** The update's selector: resolves positional (`a.$`) paths. */
  selector: Document;
  /** True when an upsert inserts: `$setOnInsert` applies. */
  inserting: boolean;
}

/** The new version of `doc`, or `doc` itself when the modifier changes nothing. */
export function applyModifier(doc: Document, modifier: Modifier, context: ApplyContext): Document {
  if (modifier.kind === 'replace') {
    const { _id, ...fields } = modifier.doc;
    if (_id !== undefined && !EJSON.equals(_id, doc._id)) throw new Error(MOD_ON_ID);
    const next = { _id: doc._id, ...fields };
    return EJSON.equals(next, doc, { keyOrderSensitive: true }) ? doc : next;
  }
  const ops = addToSetAsPush(doc, effectiveOperators(doc, modifier.ops, context.inserting));
  const next = EJSON.clone(doc);
  try {
    checkTargets(next, ops);
    const started = startPushedArrays(next, ops);
    const changed = mingoUpdate(next, ops, modifier.positional ? context.selector : undefined);
    return changed.length > 0 || started ? next : doc;
  } catch (error) {
    throw new Error(`Cannot apply update ${describe(modifier.ops)} to document ${describe(doc._id)}: ${(error as Error).message}`, {
      cause: error,
    });
  }
}

/**
 * The new versions of `docs` (each one itself when the modifier changes nothing), as `applyModifier` gives them.
 * Where every document gets the same operators, one mingo update runs them all: mingo builds its operator
 * context per call (about 30 µs), which made a multi update of 10,000 documents hold the event loop for 0.6 s.
 */
export function applyModifierToAll(docs: Document[], modifier: Modifier, context: ApplyContext): Document[] {
  const perDocument = () => docs.map((doc) => applyModifier(doc, modifier, context));
  if (docs.length < 2 || modifier.kind === 'replace' || modifier.positional || context.inserting || '$addToSet' in modifier.ops) return perDocument();
  // Only a path on _id makes the operators depend on the document (see effectiveOperators).
  if (Object.values(modifier.ops).some((args) => Object.keys(args).some(isIdPath))) return perDocument();
  const ops = effectiveOperators(docs[0]!, modifier.ops, false);
  const next = docs.map((doc) => EJSON.clone(doc));
  try {
    for (const doc of next) {
      checkTargets(doc, ops);
      startPushedArrays(doc, ops);
    }
    mingoUpdateAll(next, ops);
  } catch {
    return perDocument(); // which names the document the update cannot apply to
  }
  return next.map((doc, i) => (EJSON.equals(doc, docs[i]!, { keyOrderSensitive: true }) ? docs[i]! : doc));
}

/** The `field: value` and `field: {$eq: value}` conditions of a selector, including those inside `$and`. */
function equalities(selector: Document, out: Document = {}): Document {
  for (const [key, value] of Object.entries(selector)) {
    if (key === '$and' && Array.isArray(value)) {
      for (const clause of value) if (isPlainObject(clause)) equalities(clause, out);
    } else if (key.startsWith('$') || value instanceof RegExp) {
      continue;
    } else if (isOperatorObject(value)) {
      if ('$eq' in value) out[key] = value.$eq;
    } else {
      out[key] = value;
    }
  }
  return out;
}

/**
 * Whether an upsert draws the id it would insert under: when its selector
 * names no `_id` (or is falsy), whether or not a document then matches, as
 * Meteor does. A stub and the server must draw alike, or the inserts after it
 * in the same method get different ids on each side.
 */
export function upsertDrawsId(selector: unknown, normalized: Document): boolean {
  return !selector || !('_id' in normalized);
}

/**
 * The document an upsert inserts when nothing matched: the selector's
 * equality fields with the modifier applied (a replacement keeps only its own
 * fields). The `_id` comes from the selector, else from the modifier, else
 * from `insertedId`.
 */
export function buildUpsert(selector: Document, modifier: Modifier, insertedId: unknown): Document {
  const { _id: selectorId, ...fields } = EJSON.clone(equalities(selector));
  const modifierId =
    modifier.kind === 'replace' ? modifier.doc._id : (modifier.ops.$setOnInsert?._id ?? modifier.ops.$set?._id);
  const id = [selectorId, modifierId, insertedId].find((candidate) => candidate !== undefined);
  if (id === undefined) throw new Error('An upsert needs an _id: the selector names none and no insertedId was given');
  const base: Document = { _id: id };
  if (modifier.kind === 'operators' && Object.keys(fields).length > 0) {
    try {
      mingoUpdate(base, { $set: fields });
    } catch (error) {
      throw new Error(`Cannot build an upsert from selector ${describe(selector)}: ${(error as Error).message}`, { cause: error });
    }
  }
  const doc = applyModifier(base, modifier, { selector, inserting: true });
  assertValidDocument(doc);
  return doc;
}
