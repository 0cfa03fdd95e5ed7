/**
 * Snapshots: the whole store as of one seq, as lines of mutations (index
 * definitions, then documents) between a header and an end marker. Loading one
 * is replaying those mutations. Compaction writes a snapshot so that the log
 * before it can be deleted.
 */
import { open, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { EJSON } from '../../ddp/ejson.js';
import type { Document } from '../types.js';
import { fsyncDir, listDataFiles, readLines, snapshotFileName } from './files.js';
import type { IndexSpec } from './indexes.js';
import { encodeLine, toMutation, type Mutation } from './records.js';
import { isPlainObject } from '../../query/values.js';

const FORMAT = 'perseid-snapshot';
const VERSION = 1;
const CHUNK_CHARS = 1 << 20;

export interface CollectionImage {
  name: string;
  indexes: IndexSpec[];
  /** The stored (immutable) documents, in natural order. */
  docs: Document[];
}

/**
 * Writes a snapshot to a temporary file, fsyncs it, renames it into place and
 * fsyncs the directory: a crash leaves either no snapshot or a complete one.
 * Yields to the event loop between chunks; the images are immutable, so writes
 * may go on meanwhile. Returns the snapshot's size in bytes.
 */
async function writeSnapshot(dir: string, seq: number, collections: readonly CollectionImage[]): Promise<number> {
  const path = join(dir, snapshotFileName(seq));
  const temporary = `${path}.tmp`;
  const file = await open(temporary, 'w');
  let bytes = 0;
  try {
    let records = 0;
    let chunk = encodeLine({ format: FORMAT, version: VERSION, seq });
    const flush = async (): Promise<void> => {
      bytes += Buffer.byteLength(chunk);
      await file.writeFile(chunk);
      chunk = '';
    };
    for (const { name, indexes, docs } of collections) {
      for (const index of indexes) chunk += encodeLine({ op: 'createIndex', collection: name, index });
      for (const doc of docs) {
        chunk += encodeLine({ op: 'put', collection: name, doc });
        if (chunk.length >= CHUNK_CHARS) await flush();
      }
      records += indexes.length + docs.length;
    }
    chunk += encodeLine({ end: seq, records });
    await flush();
    await file.sync();
  } catch (error) {
    await file.close();
    await rm(temporary, { force: true });
    throw error;
  }
  await file.close();
  await rename(temporary, path);
  fsyncDir(dir);
  return bytes;
}

/**
 * Compaction's file steps, in an order that is safe to interrupt anywhere:
 * the snapshot is made durable first; only then are the logs before
 * `generation` and the older snapshots, which it makes redundant, deleted.
 * (The caller has already switched the log to `generation`.) Recovery
 * tolerates every intermediate state: it ignores temporary files, picks the
 * newest complete snapshot and skips log records it already covers.
 */
export async function compactFiles(
  dir: string,
  seq: number,
  collections: readonly CollectionImage[],
  generation: number,
): Promise<number> {
  const bytes = await writeSnapshot(dir, seq, collections);
  const files = listDataFiles(dir);
  for (const log of files.logs) if (log.generation < generation) await rm(log.path);
  for (const snapshot of files.snapshots) if (snapshot.seq < seq) await rm(snapshot.path);
  return bytes;
}

export interface LoadedSnapshot {
  seq: number;
  mutations: Mutation[];
  bytes: number;
}

/** Reads and validates a whole snapshot; throws if it is damaged or incomplete. */
export function readSnapshot(path: string): LoadedSnapshot {
  let seq: number | undefined;
  let ended = false;
  const mutations: Mutation[] = [];
  const scan = readLines(path, (line, lineNo) => {
    try {
      if (ended) throw new Error('data after the end marker');
      const value = EJSON.parse(line);
      if (lineNo === 1) {
        if (!isPlainObject(value) || value.format !== FORMAT || value.version !== VERSION || typeof value.seq !== 'number') {
          throw new Error('not a snapshot header');
        }
        seq = value.seq;
      } else if (isPlainObject(value) && 'end' in value) {
        if (value.end !== seq || value.records !== mutations.length) throw new Error('end marker does not match');
        ended = true;
      } else {
        mutations.push(toMutation(value));
      }
    } catch (error) {
      throw new Error(`Snapshot ${path} is invalid at line ${lineNo}: ${(error as Error).message}`, { cause: error });
    }
  });
  if (seq === undefined || !ended || scan.partialTail) throw new Error(`Snapshot ${path} is incomplete`);
  return { seq, mutations, bytes: scan.completeBytes };
}
