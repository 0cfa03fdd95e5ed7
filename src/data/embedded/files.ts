/**
 * The data directory's layout and the file primitives recovery and compaction
 * share: write-ahead logs `wal-<generation>.log`, snapshots
 * `snapshot-<seq>.snap`, temporary files `*.tmp`, the lock file, and the
 * scratch file a failed log's probe writes.
 */
import { closeSync, fsyncSync, openSync, readdirSync, readSync } from 'node:fs';
import { join } from 'node:path';

export const LOCK_FILE = 'LOCK';
export const PROBE_FILE = 'write-probe';
const LOG_NAME = /^wal-(\d+)\.log$/;
const SNAPSHOT_NAME = /^snapshot-(\d+)\.snap$/;
const CHUNK_BYTES = 1 << 20;

export function logFileName(generation: number): string {
  return `wal-${String(generation).padStart(8, '0')}.log`;
}

export function snapshotFileName(seq: number): string {
  return `snapshot-${String(seq).padStart(16, '0')}.snap`;
}

export interface DataFiles {
  /** Oldest generation first. */
  logs: Array<{ generation: number; path: string }>;
  /** Lowest seq first. */
  snapshots: Array<{ seq: number; path: string }>;
  /** Left over by a crash while a snapshot was being written. */
  temporary: string[];
}

export function listDataFiles(dir: string): DataFiles {
  const files: DataFiles = { logs: [], snapshots: [], temporary: [] };
  for (const name of readdirSync(dir)) {
    const log = LOG_NAME.exec(name);
    const snapshot = SNAPSHOT_NAME.exec(name);
    if (log) files.logs.push({ generation: Number(log[1]), path: join(dir, name) });
    else if (snapshot) files.snapshots.push({ seq: Number(snapshot[1]), path: join(dir, name) });
    else if (name.endsWith('.tmp')) files.temporary.push(join(dir, name));
  }
  files.logs.sort((a, b) => a.generation - b.generation);
  files.snapshots.sort((a, b) => a.seq - b.seq);
  return files;
}

/** Makes created, renamed and deleted directory entries durable. */
export function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export interface LineScan {
  /** Number of complete lines. */
  lines: number;
  /** Byte length of the file up to the end of its last complete line. */
  completeBytes: number;
  /** The text after the last newline (a line whose append was cut short), if any. */
  tail: string | undefined;
}

/**
 * Calls `onLine` for every newline-terminated line (with the byte offset just
 * past it), reading in chunks so that a large file never has to be one string.
 */
export function readLines(path: string, onLine: (line: string, lineNo: number, endOffset: number) => void): LineScan {
  const fd = openSync(path, 'r');
  try {
    const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
    let carry: Buffer[] = []; // the start of a line that began in an earlier chunk
    let position = 0;
    let lineNo = 0;
    let completeBytes = 0;
    for (;;) {
      const read = readSync(fd, buffer, 0, CHUNK_BYTES, position);
      if (read === 0) break;
      const chunk = buffer.subarray(0, read);
      let start = 0;
      for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
        const line =
          carry.length === 0
            ? chunk.toString('utf8', start, nl)
            : Buffer.concat([...carry, chunk.subarray(start, nl)]).toString('utf8');
        carry = [];
        completeBytes = position + nl + 1;
        onLine(line, ++lineNo, completeBytes);
        start = nl + 1;
      }
      if (start < read) carry.push(Buffer.from(chunk.subarray(start)));
      position += read;
    }
    return { lines: lineNo, completeBytes, tail: carry.length > 0 ? Buffer.concat(carry).toString('utf8') : undefined };
  } finally {
    closeSync(fd);
  }
}
