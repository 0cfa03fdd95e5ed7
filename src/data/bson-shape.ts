/**
 * Perseid (EJSON) values in the shape MongoDB stores them, as Meteor maps them:
 * our ObjectID as a BSON ObjectId, Uint8Array as Binary, a custom EJSON type as
 * its EJSON form with every key prefixed `EJSON`. The BSON classes come from
 * the caller: the MongoDB driver's for what it sends, the `bson` package's for
 * measuring a document without loading the driver (the embedded store).
 */
import { EJSON, isCustomType } from '../ddp/ejson.js';
import { ObjectID } from '../ddp/object-id.js';

type Plain = Record<string, unknown>;

export interface BsonClasses {
  objectId(hex: string): unknown;
  binary(bytes: Uint8Array): unknown;
}

/** `value` with `convert` applied to each element or field, copied only where something changed. */
export function mapValues(value: unknown, convert: (v: unknown) => unknown): unknown {
  if (Array.isArray(value)) {
    let out: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      const next = convert(item);
      if (next !== item && !out) out = value.slice(0, i);
      if (out) out.push(next);
    }
    return out ?? value;
  }
  const obj = value as Plain;
  let out: Plain | undefined;
  for (const key in obj) {
    const item = obj[key];
    const next = convert(item);
    if (next !== item && !out) {
      out = {};
      for (const k in obj) {
        if (k === key) break;
        out[k] = obj[k];
      }
    }
    if (out) out[key] = next;
  }
  return out ?? obj;
}

export function renameKeys(value: unknown, rename: (key: string) => string): unknown {
  if (Array.isArray(value)) return value.map((v) => renameKeys(v, rename));
  if (value === null || typeof value !== 'object') return value;
  const out: Plain = {};
  for (const [key, v] of Object.entries(value)) out[rename(key)] = renameKeys(v, rename);
  return out;
}

export function isPlain(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null || Array.isArray(value);
}

export function toBsonShape(value: unknown, classes: BsonClasses): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (value instanceof ObjectID) return classes.objectId(value.toHexString());
  if (value instanceof Uint8Array) return classes.binary(value);
  if (value instanceof Date || value instanceof RegExp) return value;
  if (!isPlain(value) && isCustomType(value)) return renameKeys(EJSON.toJSONValue(value), (key) => `EJSON${key}`);
  return mapValues(value, (v) => toBsonShape(v, classes));
}
