/**
 * Values between Perseid (EJSON) and MongoDB (BSON), as Meteor maps them, so
 * data written by a Meteor app reads back the same: our ObjectID ↔ BSON
 * ObjectId, Uint8Array ↔ Binary (subtype 0), a custom EJSON type ↔ its EJSON
 * form with every key prefixed `EJSON` (`{EJSON$type, EJSON$value: {EJSONx: ...}}`).
 * Dates, numbers, strings and regular expressions are the same on both sides.
 * Both directions copy only what they change.
 */
import { BSON, Binary, ObjectId } from 'mongodb';
import { EJSON } from '../../ddp/ejson.js';
import { ObjectID } from '../../ddp/object-id.js';
import { isPlain, mapValues, renameKeys, toBsonShape, type BsonClasses } from '../bson-shape.js';

type Plain = Record<string, unknown>;

const DRIVER_CLASSES: BsonClasses = { objectId: (hex) => new ObjectId(hex), binary: (bytes) => new Binary(bytes) };

export function toMongo(value: unknown): unknown {
  return toBsonShape(value, DRIVER_CLASSES);
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
