/**
 * Recovery on open: the newest valid snapshot, then every log record after it,
 * in seq order. Seqs are contiguous, so a missing record is detected rather
 * than silently skipped.
 */
import { rmSync, statSync } from 'node:fs';
import type { Logger } from '../../log.js';
import { listDataFiles } from './files.js';
import type { Mutation } from './records.js';
import { readSnapshot, type LoadedSnapshot } from './snapshot.js';
import { readLog } from './wal.js';

export interface Recovery {
  lastSeq: number;
  /** The newest log's generation, 0 when there is no log yet. */
  generation: number;
  /** Size of the snapshot recovered from, 0 when none. */
  snapshotBytes: number;
}

function newestValidSnapshot(paths: readonly string[], log: Logger): LoadedSnapshot | undefined {
  for (const path of [...paths].reverse()) {
    try {
      return readSnapshot(path);
    } catch (error) {
      log.warn('skipping an unreadable snapshot', { file: path, error });
    }
  }
  return undefined;
}

export function recover(dir: string, apply: (mutation: Mutation) => void, log: Logger): Recovery {
  const files = listDataFiles(dir);
  for (const path of files.temporary) {
    rmSync(path);
    log.warn('removed an unfinished snapshot left by a crash', { file: path });
  }
  const snapshot = newestValidSnapshot(
    files.snapshots.map((s) => s.path),
    log,
  );
  for (const mutation of snapshot?.mutations ?? []) apply(mutation);
  const covered = snapshot?.seq ?? 0;
  let lastSeq = covered;
  files.logs.forEach(({ path }, i) => {
    // Only the last log being written can end in a torn line; later logs exist but are still empty.
    const tolerateTornTail = files.logs.slice(i + 1).every((later) => statSync(later.path).size === 0);
    readLog(
      path,
      tolerateTornTail,
      (record, lineNo) => {
        if (record.seq <= covered) return;
        if (record.seq !== lastSeq + 1) {
          throw new Error(
            `The write-ahead log ${path} has seq ${record.seq} at line ${lineNo} where ${lastSeq + 1} was expected: ` +
              'records are missing; restore the data directory from a backup.',
          );
        }
        try {
          apply(record);
        } catch (error) {
          throw new Error(`Cannot replay ${path} line ${lineNo}: ${(error as Error).message}`, { cause: error });
        }
        lastSeq = record.seq;
      },
      log,
    );
  });
  return { lastSeq, generation: files.logs.at(-1)?.generation ?? 0, snapshotBytes: snapshot?.bytes ?? 0 };
}
