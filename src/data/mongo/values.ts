/**
 * Values between Perseid (EJSON) and MongoDB (BSON), as Meteor maps them, so
 * data written by a Meteor app reads back the same: our ObjectID ↔ BSON
 * ObjectId, Uint8Array ↔ Binary (subtype 0), a custom EJSON type ↔ its EJSON
 * form with every key prefixed `EJSON` (`{EJSON$type, EJSON$value: {EJSONx: ...}}`).
 * Dates, numbers, strings and regular expressions are the same on both sides.
 * Both directions copy only what they change.
 */
import { BSON, Binary, ObjectId } from 'mongodb';
import { EJSON, isCustomType } from '../../ddp/ejson.js';
import { ObjectID } from '../../ddp/object-id.js';

type Plain = Record<string, unknown>;

function mapValues(value: unknown, convert: (v: unknown) => unknown): unknown {
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

function renameKeys(value: unknown, rename: (key: string) => string): unknown {
  if (Array.isArray(value)) return value.map((v) => renameKeys(v, rename));
  if (value === null || typeof value !== 'object') return value;
  const out: Plain = {};
  for (const [key, v] of Object.entries(value)) out[rename(key)] = renameKeys(v, rename);
  return out;
}

function isPlain(value: object): boolean {
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null || Array.isArray(value);
}

export function toMongo(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (value instanceof ObjectID) return new ObjectId(value.toHexString());
  if (value instanceof Uint8Array) return new Binary(value);
  if (value instanceof Date || value instanceof RegExp) return value;
  if (!isPlain(value) && isCustomType(value)) return renameKeys(EJSON.toJSONValue(value), (key) => `EJSON${key}`);
  return mapValues(value, toMongo);
}

export function fromMongo(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (value instanceof ObjectId) return new ObjectID(value.toHexString());
  if (value instanceof Binary) {
    // Subtype 0 is Meteor's binary; other subtypes (UUIDs...) pass through as their bytes too.
    return new Uint8Array(value.buffer.buffer, value.buffer.byteOffset, value.position);
  }
  if (value instanceof Date || value instanceof RegExp) return value;
  const obj = value as Plain;
  if (!Array.isArray(obj) && typeof obj.EJSON$type === 'string' && 'EJSON$value' in obj && Object.keys(obj).length === 2) {
    return EJSON.fromJSONValue(renameKeys(obj, (key) => key.slice(5)));
  }
  if (!isPlain(obj)) return obj;
  return mapValues(obj, fromMongo);
}

/** A document read from MongoDB, as Perseid documents look. */
export function fromMongoDocument(doc: Plain): Plain {
  return fromMongo(doc) as Plain;
}

/**
 * A document as the database stores and reports it (a copy; `undefined` values null, `_id`
 * first), for applying this process's insert before the feed reports it.
 */
export function storedForm(doc: Plain): Plain {
  const { _id, ...rest } = BSON.deserialize(BSON.serialize(doc));
  return fromMongoDocument({ _id, ...rest });
}
