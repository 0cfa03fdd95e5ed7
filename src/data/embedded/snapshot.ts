/**
 * Snapshots: the whole store as of one seq, as lines of mutations (index
 * definitions, then documents) between a header and an end marker. Loading one
 * is replaying those mutations. Compaction writes a snapshot so that the log
 * before it can be deleted.
 */
import { open, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Document } from '../types.js';
import { fsyncDir, listDataFiles, readLines, snapshotFileName } from './files.js';
import type { IndexSpec } from './indexes.js';
import { DamagedLineError, encodeLine, LineReader, toMutation, type DamagedRecord, type Mutation } from './records.js';
import { isPlainObject } from '../../query/values.js';

const FORMAT = 'perseid-snapshot';
/** 2: checksummed lines, and the first log generation the snapshot does not cover. Version 1 is still read. */
const VERSION = 2;
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
export async function writeSnapshot(dir: string, seq: number, generation: number, collections: readonly CollectionImage[]): Promise<number> {
  const path = join(dir, snapshotFileName(seq));
  const temporary = `${path}.tmp`;
  const file = await open(temporary, 'w');
  let bytes = 0;
  try {
    let records = 0;
    let chunk = encodeLine({ format: FORMAT, version: VERSION, seq, generation });
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
  const bytes = await writeSnapshot(dir, seq, generation, collections);
  const files = listDataFiles(dir);
  for (const log of files.logs) if (log.generation < generation) await rm(log.path);
  for (const snapshot of files.snapshots) if (snapshot.seq < seq) await rm(snapshot.path);
  return bytes;
}

export interface LoadedSnapshot {
  seq: number;
  /** Logs before this generation are covered by the snapshot (0 for a version 1 snapshot: read them all). */
  generation: number;
  mutations: Mutation[];
  bytes: number;
}

/**
 * Reads and validates a whole snapshot. Without `onDamaged` any damage throws;
 * with it (repair), a damaged line is reported and skipped, a damaged header
 * is replaced by what the file name says, and a missing end is reported.
 */
export function readSnapshot(path: string, onDamaged?: (damage: DamagedRecord) => void): LoadedSnapshot {
  let header: { seq: number; generation: number } | undefined;
  let end: { seq: unknown; records: unknown } | undefined;
  const mutations: Mutation[] = [];
  const reader = new LineReader();
  let damagedRecords = 0;
  const damaged = (line: number, reason: string, text: string): void => {
    if (!onDamaged) throw new Error(`Snapshot ${path} is invalid at line ${line}: ${reason}`);
    onDamaged({ file: path, line, reason, text });
  };
  const scan = readLines(path, (line, lineNo) => {
    try {
      if (end) throw new DamagedLineError('data after the end marker');
      const value = reader.read(line);
      if (lineNo === 1) {
        if (!isPlainObject(value) || value.format !== FORMAT || typeof value.seq !== 'number' || (value.version !== 1 && value.version !== VERSION)) {
          throw new DamagedLineError('not a snapshot header');
        }
        header = { seq: value.seq, generation: typeof value.generation === 'number' ? value.generation : 0 };
      } else if (isPlainObject(value) && 'end' in value) {
        end = { seq: value.end, records: value.records };
      } else {
        mutations.push(toMutation(value));
      }
    } catch (error) {
      if (!(error instanceof DamagedLineError)) throw error;
      if (lineNo > 1) damagedRecords += 1;
      damaged(lineNo, error.message, line);
    }
  });
  if (scan.tail !== undefined) damaged(scan.lines + 1, 'incomplete line', scan.tail);
  const seq = header?.seq ?? seqFromName(path);
  if (!end) damaged(scan.lines + 1, 'no end marker: the snapshot is incomplete', '');
  else if (end.seq !== seq || end.records !== mutations.length + damagedRecords) damaged(scan.lines, `the end marker says seq ${String(end.seq)} and ${String(end.records)} records, the snapshot has seq ${seq} and ${mutations.length}`, '');
  return { seq, generation: header?.generation ?? 0, mutations, bytes: scan.completeBytes };
}

function seqFromName(path: string): number {
  return Number(/snapshot-(\d+)\.snap$/.exec(path)?.[1] ?? 0);
}
