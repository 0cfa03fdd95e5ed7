/**
 * The records of the write-ahead log and of snapshots: one EJSON object per
 * line. Updates log the whole new document, so replaying any record is a plain
 * state change that needs no query evaluation.
 */
import type { Document } from '../types.js';
import { EJSON } from '../../ddp/ejson.js';
import type { IndexSpec } from './indexes.js';
import { isPlainObject } from '../../query/values.js';

export type Mutation =
  | { op: 'put'; collection: string; doc: Document }
  | { op: 'remove'; collection: string; id: unknown }
  | { op: 'createIndex'; collection: string; index: IndexSpec }
  | { op: 'dropIndex'; collection: string; name: string }
  | { op: 'dropCollection'; collection: string };

/** A mutation as logged: `seq` is its position in the store's total order. */
export type LogRecord = Mutation & { seq: number };

export function encodeLine(value: unknown): string {
  return EJSON.stringify(value) + '\n';
}

function fail(reason: string): never {
  throw new Error(reason);
}

function isIndexSpec(value: unknown): value is IndexSpec {
  return (
    isPlainObject(value) &&
    typeof value.name === 'string' &&
    isPlainObject(value.keys) &&
    typeof value.unique === 'boolean' &&
    typeof value.sparse === 'boolean'
  );
}

/** Checks the shape of a decoded record; throws a short reason when it is not a mutation. */
export function toMutation(value: unknown): Mutation {
  if (!isPlainObject(value)) fail('not an object');
  if (typeof value.collection !== 'string') fail('no collection name');
  switch (value.op) {
    case 'put':
      if (!isPlainObject(value.doc) || value.doc._id === undefined) fail('put without a document');
      break;
    case 'remove':
      if (!('id' in value)) fail('remove without an id');
      break;
    case 'createIndex':
      if (!isIndexSpec(value.index)) fail('createIndex without a valid index');
      break;
    case 'dropIndex':
      if (typeof value.name !== 'string') fail('dropIndex without a name');
      break;
    case 'dropCollection':
      break;
    default:
      fail(`unknown op ${JSON.stringify(value.op)}`);
  }
  return value as Mutation;
}

export function decodeRecord(line: string): LogRecord {
  const value = EJSON.parse(line);
  const mutation = toMutation(value);
  const seq = (value as { seq?: unknown }).seq;
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 1) fail('no valid seq');
  return mutation as LogRecord;
}
