/**
 * The records of the write-ahead log and of snapshots: one EJSON object per
 * line, behind a checksum. Updates log the whole new document, so replaying
 * any record is a plain state change that needs no query evaluation.
 *
 * A line is `<crc32 as 8 hex digits> <json>`: a flipped byte anywhere in it is
 * found on reading instead of being applied. Lines written before checksums
 * existed start with `{` and are still read (without a check), but only
 * before the first checksummed line of a file: after one, a bare line is
 * damage, not the old format.
 */
import { crc32 } from 'node:zlib'; // Node 20.15+, and package.json asks for 20.19+: no fallback needed
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

/**
 * A mutation as logged: `seq` is its position in the store's total order.
 * `more` marks every record of a write but its last, so that recovery applies
 * a write whole or not at all: a crash can cut a batch's write() short after
 * any line. (Records written before it existed each count as a whole write.)
 */
export type LogRecord = Mutation & { seq: number; more?: true };

const CHECKSUMMED = /^([0-9a-f]{8}) /;

function checksum(json: string): string {
  return crc32(json).toString(16).padStart(8, '0');
}

export function encodeLine(value: unknown): string {
  const json = EJSON.stringify(value);
  return `${checksum(json)} ${json}\n`;
}

/**
 * Throws for a document the log could not give back: an invalid Date (from
 * `new Date('junk')`, say) is written as `{"$date":null}`, which no reader
 * takes, so the store would not open again.
 */
export function assertLoggable(value: unknown, path = ''): void {
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new Error(`Cannot store an invalid Date${path ? ` (at ${path})` : ''}: dates must be within ±8.64e15 ms of 1970`);
    return;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) assertLoggable(value[i], path ? `${path}.${i}` : String(i));
  } else if (isPlainObject(value)) {
    for (const key in value) assertLoggable(value[key], path ? `${path}.${key}` : key);
  }
}

/**
 * Stores undefined as null, in place (in the store's own copy of a document):
 * the log cannot hold undefined (JSON leaves the field out), so a field set to
 * undefined was there until a restart and gone after it; MongoDB's driver
 * stores null.
 */
export function undefinedToNull(value: Record<string, unknown> | unknown[]): void {
  for (const key in value) {
    const item = (value as Record<string, unknown>)[key];
    if (item === undefined) (value as Record<string, unknown>)[key] = null;
    else if (Array.isArray(item) || isPlainObject(item)) undefinedToNull(item);
  }
}

/** A record that could not be read or applied: where, why, and its text. */
export interface DamagedRecord {
  file: string;
  /** 1-based line number in `file`. */
  line: number;
  reason: string;
  text: string;
}

/** A line that cannot be read as what it should be; `reason` is short, for reports. */
export class DamagedLineError extends Error {}

function fail(reason: string): never {
  throw new DamagedLineError(reason);
}

/** Tells, line after line, whether a file's lines carry checksums (see the header). */
export class LineReader {
  private checksummed = false;

  /** Checks one line's checksum (when it has one) and parses it; throws DamagedLineError. */
  read(line: string): unknown {
    const framed = CHECKSUMMED.exec(line);
    let json: string;
    if (framed) {
      json = line.slice(framed[0].length);
      if (checksum(json) !== framed[1]) fail('checksum mismatch');
      this.checksummed = true;
    } else {
      if (this.checksummed || !line.startsWith('{')) fail('no checksum');
      json = line;
    }
    try {
      return EJSON.parse(json);
    } catch (error) {
      fail(`not EJSON: ${(error as Error).message}`);
    }
  }
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

export function toLogRecord(value: unknown): LogRecord {
  const mutation = toMutation(value);
  const seq = (value as { seq?: unknown }).seq;
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 1) fail('no valid seq');
  const more = (value as { more?: unknown }).more;
  if (more !== undefined && more !== true) fail('invalid more');
  return mutation as LogRecord;
}
