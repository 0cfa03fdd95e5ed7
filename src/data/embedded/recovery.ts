/**
 * Recovery on open: the newest valid snapshot, then every log record after it,
 * in seq order. Seqs are contiguous, so a missing record is detected rather
 * than silently skipped; every line carries a checksum, so a damaged record is
 * detected rather than applied.
 *
 * Opening refuses a damaged store (StoreDamagedError, naming the place and
 * `perseid store repair`); only an incomplete last line, an append a crash cut
 * short and so never acknowledged, is cut off by itself. Repair reads the same
 * way but reports each damaged record and goes on, changing nothing on disk.
 */
import { basename } from 'node:path';
import { rmSync, statSync } from 'node:fs';
import type { Logger } from '../../log.js';
import { listDataFiles, type DataFiles } from './files.js';
import type { DamagedRecord, LogRecord, Mutation } from './records.js';
import { readSnapshot, type LoadedSnapshot } from './snapshot.js';
import { StoreDamagedError } from './store-errors.js';
import { cutTornTail, readLog } from './wal.js';

export interface Recovery {
  lastSeq: number;
  /** The generation new writes go to at least: the newest log's, or the one the snapshot starts at. */
  generation: number;
  /** Size of the snapshot recovered from, 0 when none. */
  snapshotBytes: number;
}

export interface RecoverOptions {
  /** Change nothing on disk: leave a torn tail and a leftover temporary file where they are. */
  readOnly?: boolean;
  /**
   * For repair: report each damaged or missing record (and an incomplete last
   * line) and go on with the intact ones, instead of refusing. Implies readOnly.
   */
  onDamaged?: (damage: DamagedRecord) => void;
  /** For repair's report: called after each file with how many records it gave. */
  onFile?: (file: string, records: number) => void;
}

function describe(damage: DamagedRecord, lastLine: boolean): string {
  const where = `${basename(damage.file)} line ${damage.line}`;
  const last = lastLine ? ' (its last line, but complete, so it may have been acknowledged)' : '';
  return `${where}${last}: ${damage.reason}`;
}

/** Replays records in seq order and decides what damage means (refuse, or report and go on). */
class Replay {
  lastSeq: number;
  /** The first damage met when refusing; nothing after it is applied. */
  firstDamage: DamagedRecord | undefined;
  /** Damage was reported since the last record applied: a gap in seqs is its doing, not news. */
  private damagedSinceApplied = false;

  constructor(
    private readonly covered: number,
    private readonly apply: (mutation: Mutation) => void,
    private readonly onDamaged: ((damage: DamagedRecord) => void) | undefined,
    /** Snapshots opening had to skip: a gap they would have filled names them. */
    private readonly unreadable: readonly UnreadableSnapshot[] = [],
  ) {
    this.lastSeq = covered;
  }

  damaged(damage: DamagedRecord): void {
    this.damagedSinceApplied = true;
    if (this.onDamaged) this.onDamaged(damage);
    else this.firstDamage ??= damage;
  }

  /** Applies one record; returns whether it was applied. */
  record(file: string, record: LogRecord, line: number, text: () => string): boolean {
    if (this.firstDamage || record.seq <= this.covered) return false;
    if (record.seq <= this.lastSeq) {
      this.damaged({ file, line, reason: `seq ${record.seq} after ${this.lastSeq}: out of order`, text: text() });
      return false;
    }
    if (record.seq !== this.lastSeq + 1) {
      const from = this.lastSeq + 1;
      const missing = record.seq === from + 1 ? `record ${from} is missing` : `records ${from} to ${record.seq - 1} are missing`;
      const lost = this.unreadable.find((s) => s.seq >= from && s.seq < record.seq);
      const reason = lost ? `${missing}, and ${basename(lost.file)}, which held them, is unreadable (${lost.reason})` : missing;
      if (!this.damagedSinceApplied) this.damaged({ file, line, reason: `seq ${record.seq} where ${from} was expected: ${reason}`, text: '' });
      if (this.firstDamage) return false;
    }
    try {
      this.apply(record);
    } catch (error) {
      this.damaged({ file, line, reason: `cannot be applied: ${(error as Error).message}`, text: text() });
      return false;
    }
    this.lastSeq = record.seq;
    this.damagedSinceApplied = false;
    return true;
  }
}

interface UnreadableSnapshot {
  file: string;
  seq: number;
  reason: string;
}

function newestValidSnapshot(snapshots: DataFiles['snapshots'], skipped: UnreadableSnapshot[], log: Logger): LoadedSnapshot | undefined {
  for (const { path, seq } of [...snapshots].reverse()) {
    try {
      return readSnapshot(path);
    } catch (error) {
      skipped.push({ file: path, seq, reason: (error as Error).message.replace(/^Snapshot \S+ /, '') });
      log.warn('skipping an unreadable snapshot', { file: path, error });
    }
  }
  return undefined;
}

export function recover(dir: string, apply: (mutation: Mutation) => void, log: Logger, options: RecoverOptions = {}): Recovery {
  const repairing = options.onDamaged !== undefined;
  const readOnly = repairing || options.readOnly === true;
  const files = listDataFiles(dir);
  if (!readOnly) {
    for (const path of files.temporary) {
      rmSync(path);
      log.warn('removed an unfinished snapshot left by a crash', { file: path });
    }
  }
  const skippedSnapshots: UnreadableSnapshot[] = [];
  const newest = files.snapshots.at(-1)?.path;
  // Repair keeps what it can of the newest snapshot; opening falls back to an older one (or none) the logs still extend.
  const snapshot = repairing && newest ? readSnapshot(newest, options.onDamaged) : newestValidSnapshot(files.snapshots, skippedSnapshots, log);
  const replay = new Replay(snapshot?.seq ?? 0, apply, options.onDamaged, skippedSnapshots);
  if (snapshot) {
    let applied = 0;
    snapshot.mutations.forEach((mutation) => {
      try {
        apply(mutation);
        applied += 1;
      } catch (error) {
        // Only repair gets here: a snapshot that opening accepts replays as it was written.
        replay.damaged({ file: newest!, line: 0, reason: `cannot be applied: ${(error as Error).message}`, text: JSON.stringify(mutation) });
      }
    });
    options.onFile?.(newest!, applied);
  }
  // Logs before the snapshot's generation hold only records it covers (left behind by an interrupted compaction).
  const logs = files.logs.filter((l) => l.generation >= (snapshot?.generation ?? 0));
  logs.forEach(({ path }, i) => {
    // Only the last log being written can end in a torn line; later logs exist but are still empty.
    const tornTailAllowed = logs.slice(i + 1).every((later) => statSync(later.path).size === 0);
    let records = 0;
    let lastLine = 0;
    let lineDamage: DamagedRecord | undefined;
    const scan = readLog(
      path,
      tornTailAllowed,
      (record, line) => {
        lastLine = line;
        if (replay.record(path, record, line, () => JSON.stringify(record))) records += 1;
      },
      (damage) => {
        lastLine = damage.line;
        lineDamage = damage;
        replay.damaged(damage);
      },
    );
    const damage = replay.firstDamage;
    if (damage) {
      const lastLineDamaged = damage === lineDamage && damage.line === lastLine && !scan.tornTail && i === logs.length - 1;
      throw new StoreDamagedError(dir, describe(damage, lastLineDamaged));
    }
    if (scan.tornTail) {
      if (repairing) replay.damaged({ file: path, line: scan.tornTail.line, reason: 'incomplete last line (an append cut short by a crash, never acknowledged)', text: '' });
      else if (!readOnly) cutTornTail(path, scan, log);
    }
    options.onFile?.(path, records);
  });
  const uncovered = skippedSnapshots.find((s) => s.seq > replay.lastSeq);
  if (uncovered) {
    throw new StoreDamagedError(dir, `${basename(uncovered.file)} is unreadable (${uncovered.reason}) and the logs reach only seq ${replay.lastSeq}`);
  }
  return {
    lastSeq: replay.lastSeq,
    generation: Math.max(files.logs.at(-1)?.generation ?? 0, snapshot?.generation ?? 0),
    snapshotBytes: snapshot?.bytes ?? 0,
  };
}
