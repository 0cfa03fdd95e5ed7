/**
 * The write-ahead log: one checksummed record per line, appended with group
 * commit. Every append issued during one event-loop turn goes out in a single
 * write() (scheduled with setImmediate); the batch's writes are acknowledged
 * once it is in the file.
 *
 * Durability: a write() that returned has reached the kernel's page cache, so
 * an acknowledged write survives the process being killed (`kill -9`). It
 * survives a power loss or kernel crash only with `fsync: true`, which adds an
 * fdatasync per batch before acknowledging.
 *
 * A batch that cannot be written (a full disk, an I/O error) fails with every
 * append queued behind it, since those were computed on top of it; the file is
 * cut back to where the batch began, so no part of a failed write can come
 * back after a restart. Appends are then refused at once, and a probe retries
 * the disk every `retryMs` until writes work again. A log file deleted from
 * under the process (its data directory removed) fails every batch for good:
 * writes to it would be acknowledged and lost.
 */
import { closeSync, fdatasync, fstatSync, ftruncateSync, openSync, rmSync, truncateSync, write, writeFileSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from '../../log.js';
import { DatabaseUnavailableError } from '../driver.js';
import { fsyncDir, PROBE_FILE, readLines } from './files.js';
import { DamagedLineError, LineReader, toLogRecord, type DamagedRecord, type LogRecord } from './records.js';

const writeAsync = promisify(write);
const fdatasyncAsync = promisify(fdatasync);
const PROBE_MIN_BYTES = 4096;
const PROBE_MAX_BYTES = 1 << 20;
const DELETED = 'the file was deleted while the server ran (was the data directory removed?); what was logged before is only in memory now, and lost on restart';

interface Group<P> {
  text: string[];
  payloads: P[];
  settlers: Array<{ resolve: () => void; reject: (error: Error) => void }>;
}

export interface WriteAheadLogOptions<P> {
  fsync: boolean;
  /** Called with a batch's payloads once it is in the file, before its appends resolve. */
  onDurable: (payloads: P[]) => void;
  /** Called when a batch fails, before its appends (and every one queued behind it) reject. */
  onFailed: (error: DatabaseUnavailableError) => void;
  /** Called when the probe finds that writes work again. */
  onResumed: () => void;
  /** How often to probe the disk after a failure (default 1000 ms). */
  retryMs?: number;
}

export class WriteAheadLog<P> {
  private bytes: number;
  private queued: Group<P> | undefined;
  private scheduled = false;
  private writing = false;
  private failure: DatabaseUnavailableError | undefined;
  /** Bytes the failed batch tried to write: the probe writes as much. */
  private failedBytes = 0;
  /** The failed batch hit the process's file size limit (`ulimit -f`): the probe checks the log would fit it. */
  private overSizeLimit = false;
  /** The file still holds part of a failed batch (cutting it back failed too): the probe retries. */
  private cutBackPending = false;
  private probe: NodeJS.Timeout | undefined;
  private boundaryWork: Array<() => void> = [];

  private constructor(
    private path: string,
    private fd: number,
    private readonly options: WriteAheadLogOptions<P>,
  ) {
    this.bytes = fstatSync(fd).size;
  }

  /** Opens a log for appending, creating it if needed. */
  static open<P>(path: string, options: WriteAheadLogOptions<P>): WriteAheadLog<P> {
    return new WriteAheadLog(path, openLogFile(path, options.fsync), options);
  }

  /** Bytes in the current log file. */
  get size(): number {
    return this.bytes;
  }

  /** Set while writes fail: appends are refused until the probe finds the disk writable again. */
  get failed(): DatabaseUnavailableError | undefined {
    return this.failure;
  }

  /** Whether a probe is checking for the disk to take writes again (not when the file was deleted). */
  get retrying(): boolean {
    return this.probe !== undefined;
  }

  /** Queues `text` (whole lines) for the next batch; resolves once the batch is in the file. */
  append(text: string, payload?: P): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    const group = (this.queued ??= { text: [], payloads: [], settlers: [] });
    if (text !== '') group.text.push(text);
    if (payload !== undefined) group.payloads.push(payload);
    const acknowledged = new Promise<void>((resolve, reject) => group.settlers.push({ resolve, reject }));
    this.schedule();
    return acknowledged;
  }

  /**
   * Runs `work` at a moment when no batch is being written (at once if none
   * is): everything appended before is then in the file or failed, and
   * nothing appended after is. Compaction switches files there.
   */
  atBoundary<T>(work: () => T): Promise<T> {
    if (!this.writing) return Promise.resolve(work());
    return new Promise<T>((resolve, reject) =>
      this.boundaryWork.push(() => {
        try {
          resolve(work());
        } catch (error) {
          reject(error as Error);
        }
      }),
    );
  }

  /** Continues in a new file from the next batch on. Call it at a boundary (see atBoundary). */
  rotate(path: string): void {
    const fd = openLogFile(path, this.options.fsync);
    closeSync(this.fd);
    this.fd = fd;
    this.path = path;
    this.bytes = 0;
  }

  /** Writes what is queued (unless writes are failing: then nothing is pending), then closes the file. */
  async close(): Promise<void> {
    clearInterval(this.probe);
    try {
      if (!this.failure) await this.append('');
    } finally {
      closeSync(this.fd);
    }
  }

  private schedule(): void {
    if (this.scheduled || this.writing) return;
    this.scheduled = true;
    setImmediate(() => void this.flush());
  }

  private async flush(): Promise<void> {
    this.scheduled = false;
    const group = this.queued;
    if (!group) return;
    this.queued = undefined;
    const error = await this.writeGroup(group);
    if (error) {
      // Everything queued meanwhile was computed on top of the failed batch: it fails too.
      const behind = this.queued as Group<P> | undefined; // appended while the batch was being written
      this.queued = undefined;
      this.fail(error);
      for (const { reject } of [...group.settlers, ...(behind?.settlers ?? [])]) reject(error);
    } else {
      this.options.onDurable(group.payloads);
      for (const { resolve } of group.settlers) resolve();
    }
    for (const work of this.boundaryWork.splice(0)) work();
    if (this.queued) this.schedule();
  }

  /** Writes one batch; resolves with the error that stopped it, if any. */
  private async writeGroup(group: Group<P>): Promise<DatabaseUnavailableError | undefined> {
    this.writing = true;
    const data = Buffer.from(group.text.join(''), 'utf8');
    try {
      // One write() in practice; the loop only guards against a short write. Without fsync it
      // is a copy into the page cache, done here: through the thread pool it cost every write
      // an extra event-loop turn before its change reached anyone, and under load a turn is a
      // flush to every client. With fsync, the wait is the disk's and must not block the loop.
      for (let offset = 0; offset < data.length; ) {
        offset += this.options.fsync ? (await writeAsync(this.fd, data, offset, data.length - offset)).bytesWritten : writeSync(this.fd, data, offset, data.length - offset);
      }
      if (this.options.fsync && data.length > 0) await fdatasyncAsync(this.fd);
      // Writes to a file deleted from under us (the data directory removed) succeed and are lost at exit.
      if (data.length > 0 && this.deleted()) throw new Error(DELETED);
      this.bytes += data.length;
      return undefined;
    } catch (error) {
      this.failedBytes = data.length;
      this.overSizeLimit = (error as NodeJS.ErrnoException).code === 'EFBIG';
      this.cutBack();
      const hint = this.overSizeLimit ? ": the log reached this process's file size limit (ulimit -f); raise it" : '';
      return new DatabaseUnavailableError(`writing the write-ahead log ${this.path} failed: ${(error as Error).message}${hint}`, error);
    } finally {
      this.writing = false;
    }
  }

  /** Cuts the file back to its last good batch; a failure is retried by the probe. */
  private cutBack(): void {
    try {
      ftruncateSync(this.fd, this.bytes);
      this.cutBackPending = false;
    } catch {
      this.cutBackPending = true;
    }
  }

  /** The log file is no longer in any directory: what is written to it is lost when the process exits. */
  private deleted(): boolean {
    return fstatSync(this.fd).nlink === 0;
  }

  private fail(error: DatabaseUnavailableError): void {
    this.failure = error;
    if (!this.deleted()) this.probe ??= setInterval(() => this.tryResume(), this.options.retryMs ?? 1000).unref();
    this.options.onFailed(error);
  }

  /**
   * Writes as much as the failed batch did to a scratch file; if that works, so may the log. After a
   * file size limit, it writes at the log's length: a small scratch file always fits the limit, and
   * writes flapped between failing and resuming each second.
   */
  private tryResume(): void {
    const probe = join(dirname(this.path), PROBE_FILE);
    try {
      if (this.cutBackPending) this.cutBack();
      if (this.cutBackPending) return;
      const data = Buffer.alloc(Math.min(Math.max(this.failedBytes, PROBE_MIN_BYTES), PROBE_MAX_BYTES));
      if (!this.overSizeLimit) writeFileSync(probe, data);
      else {
        // Sparse up to the log's length, where the file systems a data directory lives on support it.
        // Near the limit, write() stops short of it rather than failing.
        const fd = openSync(probe, 'w');
        try {
          if (writeSync(fd, data, 0, data.length, this.bytes) < data.length) return;
        } finally {
          closeSync(fd);
        }
      }
    } catch {
      return;
    } finally {
      rmSync(probe, { force: true });
    }
    clearInterval(this.probe);
    this.probe = undefined;
    this.failure = undefined;
    this.options.onResumed();
  }
}

function openLogFile(path: string, fsync: boolean): number {
  const fd = openSync(path, 'a');
  // A new log's directory entry must be durable before writes to it are acknowledged.
  if (fsync) fsyncDir(dirname(path));
  return fd;
}

export interface LogScan {
  /** Bytes up to the end of the last complete line. */
  completeBytes: number;
  /** An incomplete last line (its append was cut short by a crash, so it was never acknowledged). */
  tornTail: { line: number; reason: string } | undefined;
}

/**
 * Reads a log's records in order, calling `onDamaged` for each complete line
 * that is not a valid record (a bad checksum, a bare line after checksummed
 * ones, garbage). An incomplete last line is not damage but an interrupted
 * append: when `tornTailAllowed` it is reported in the result for the caller
 * to cut off; otherwise (a later log has records) it is damage too.
 */
export function readLog(
  path: string,
  tornTailAllowed: boolean,
  /** `offset`: where the record's line starts in the file. */
  onRecord: (record: LogRecord, lineNo: number, offset: number) => void,
  onDamaged: (damage: DamagedRecord) => void,
): LogScan {
  const reader = new LineReader();
  let offset = 0;
  const scan = readLines(path, (line, lineNo, endOffset) => {
    const start = offset;
    offset = endOffset;
    let record: LogRecord;
    try {
      record = toLogRecord(reader.read(line));
    } catch (error) {
      if (!(error instanceof DamagedLineError)) throw error;
      onDamaged({ file: path, line: lineNo, reason: error.message, text: line });
      return;
    }
    onRecord(record, lineNo, start);
  });
  const { completeBytes } = scan;
  if (scan.tail === undefined) return { completeBytes, tornTail: undefined };
  const tornTail = { line: scan.lines + 1, reason: 'incomplete line' };
  if (tornTailAllowed) return { completeBytes, tornTail };
  onDamaged({ file: path, line: tornTail.line, reason: 'incomplete line, and a later log has records', text: scan.tail });
  return { completeBytes, tornTail: undefined };
}

/** Cuts off the records of a last write that a crash cut short, from its first record's line (at `offset`) on. */
export function cutUnfinishedWrite(path: string, offset: number, line: number, log: Logger): void {
  truncateSync(path, offset);
  log.warn('cut off the records of a write a crash cut short at the end of the write-ahead log (never acknowledged; a write is applied whole or not at all)', { file: path, line });
}

/** Cuts an interrupted last append off a log. */
export function cutTornTail(path: string, scan: LogScan, log: Logger): void {
  if (!scan.tornTail) return;
  truncateSync(path, scan.completeBytes);
  log.warn('cut off a torn last line of the write-ahead log (a write interrupted by a crash, never acknowledged)', {
    file: path,
    line: scan.tornTail.line,
  });
}
