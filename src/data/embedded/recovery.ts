/**
 * Recovery on open: the newest valid snapshot, then every log record after it,
 * in seq order. Seqs are contiguous, so a missing record is detected rather
 * than silently skipped; every line carries a checksum, so a damaged record is
 * detected rather than applied.
 *
 * Opening refuses a damaged store (StoreDamagedError, naming the place and
 * `perseid store repair`); only what a crash cut short at the end of the log,
 * and so never acknowledged, is cut off by itself: an incomplete last line,
 * and the records of a last write that lack its final one (a write is applied
 * whole or not at all). Repair reads the same way but reports each damaged
 * record and goes on, changing nothing on disk.
 */
import { basename } from 'node:path';
import { rmSync, statSync } from 'node:fs';
import type { Logger } from '../../log.js';
import { listDataFiles, type DataFiles } from './files.js';
import type { DamagedRecord, LogRecord, Mutation } from './records.js';
import { readSnapshot, type LoadedSnapshot } from './snapshot.js';
import { StoreDamagedError } from './store-errors.js';
import { cutTornTail, cutUnfinishedWrite, readLog } from './wal.js';

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
  /** The records so far of a write whose last record has not come yet. */
  private readonly unfinished: UnfinishedRecord[] = [];

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

  /** Takes one record; returns how many were applied (a write's records go in together, at its last). */
  record(file: string, record: LogRecord, line: number, offset: number, text: () => string): number {
    if (this.firstDamage || record.seq <= this.covered) return 0;
    const previous = this.unfinished.at(-1)?.record.seq ?? this.lastSeq;
    if (record.seq <= previous) {
      this.damaged({ file, line, reason: `seq ${record.seq} after ${previous}: out of order`, text: text() });
      return 0;
    }
    if (record.seq !== previous + 1) {
      const from = previous + 1;
      const missing = record.seq === from + 1 ? `record ${from} is missing` : `records ${from} to ${record.seq - 1} are missing`;
      const lost = this.unreadable.find((s) => s.seq >= from && s.seq < record.seq);
      const reason = lost ? `${missing}, and ${basename(lost.file)}, which held them, is unreadable (${lost.reason})` : missing;
      if (!this.damagedSinceApplied) this.damaged({ file, line, reason: `seq ${record.seq} where ${from} was expected: ${reason}`, text: '' });
      if (this.firstDamage) return 0;
    }
    this.unfinished.push({ file, record, line, offset, text });
    if (record.more) return 0;
    let applied = 0;
    for (const part of this.unfinished.splice(0)) {
      try {
        this.apply(part.record);
      } catch (error) {
        this.damaged({ file: part.file, line: part.line, reason: `cannot be applied: ${(error as Error).message}`, text: part.text() });
        if (this.firstDamage) break;
        continue;
      }
      this.lastSeq = part.record.seq;
      this.damagedSinceApplied = false;
      applied += 1;
    }
    return applied;
  }

  /** Drops the records of a write whose last record never came; returns where the first is. */
  dropUnfinished(): UnfinishedRecord | undefined {
    return this.unfinished.splice(0)[0];
  }
}

interface UnfinishedRecord {
  file: string;
  record: LogRecord;
  line: number;
  /** Where its line starts in the file. */
  offset: number;
  text: () => string;
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
      (record, line, offset) => {
        lastLine = line;
        records += replay.record(path, record, line, offset, () => JSON.stringify(record));
      },
      (damage) => {
        lastLine = damage.line;
        lineDamage = damage;
        replay.damaged(damage);
      },
    );
    const unfinished = replay.dropUnfinished();
    if (unfinished && !tornTailAllowed) {
      replay.damaged({ file: path, line: unfinished.line, reason: 'the records of a write end before its last one, and a later log has records', text: unfinished.text() });
    }
    const damage = replay.firstDamage;
    if (damage) {
      const lastLineDamaged = damage === lineDamage && damage.line === lastLine && !scan.tornTail && i === logs.length - 1;
      throw new StoreDamagedError(dir, describe(damage, lastLineDamaged));
    }
    if (unfinished && tornTailAllowed) {
      // A crash cut the batch's write() short: the write was never acknowledged, and goes whole.
      if (repairing) replay.damaged({ file: path, line: unfinished.line, reason: 'the first record of a write a crash cut short (never acknowledged)', text: unfinished.text() });
      else if (!readOnly) cutUnfinishedWrite(path, unfinished.offset, unfinished.line, log);
    } else if (scan.tornTail) {
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
