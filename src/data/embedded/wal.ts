/**
 * The write-ahead log: one EJSON record per line, appended with group commit.
 * Every append issued during one event-loop turn goes out in a single write()
 * (scheduled with setImmediate); the batch's writes are acknowledged once it
 * is in the file.
 *
 * Durability: a write() that returned has reached the kernel's page cache, so
 * an acknowledged write survives the process being killed (`kill -9`). It
 * survives a power loss or kernel crash only with `fsync: true`, which adds an
 * fdatasync per batch before acknowledging.
 */
import { closeSync, fdatasync, fstatSync, openSync, truncateSync, write, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from '../../log.js';
import { DatabaseUnavailableError } from '../driver.js';
import { fsyncDir, readLines } from './files.js';
import { decodeRecord, type LogRecord } from './records.js';

const writeAsync = promisify(write);
const fdatasyncAsync = promisify(fdatasync);

interface Group<P> {
  text: string[];
  payloads: P[];
  settlers: Array<{ resolve: () => void; reject: (error: Error) => void }>;
}

export interface WriteAheadLogOptions<P> {
  fsync: boolean;
  /** Called with a batch's payloads once it is in the file, before its appends resolve. */
  onDurable: (payloads: P[]) => void;
}

export class WriteAheadLog<P> {
  private bytes: number;
  private queued: Group<P> | undefined;
  private scheduled = false;
  private writing = false;
  private failure: Error | undefined;

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

  /** Set once a write has failed: the log no longer matches memory and accepts nothing more. */
  get failed(): Error | undefined {
    return this.failure;
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
   * Continues in a new file from the next batch on; a batch being written
   * finishes in the old one. Synchronous, so that the caller can pair the
   * switch with a consistent in-memory state.
   */
  rotate(path: string): void {
    const old = this.fd;
    this.fd = openLogFile(path, this.options.fsync);
    this.path = path;
    this.bytes = 0;
    if (!this.writing) closeSync(old);
  }

  /** Writes what is queued, then closes the file. */
  async close(): Promise<void> {
    try {
      await this.append('');
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
    if (!this.failure) await this.writeGroup(group);
    if (this.failure) {
      for (const { reject } of group.settlers) reject(this.failure);
    } else {
      this.options.onDurable(group.payloads);
      for (const { resolve } of group.settlers) resolve();
    }
    if (this.queued) this.schedule();
  }

  private async writeGroup(group: Group<P>): Promise<void> {
    this.writing = true;
    const fd = this.fd;
    try {
      const data = Buffer.from(group.text.join(''), 'utf8');
      // One write() in practice; the loop only guards against a short write. Without fsync it
      // is a copy into the page cache, done here: through the thread pool it cost every write
      // an extra event-loop turn before its change reached anyone, and under load a turn is a
      // flush to every client. With fsync, the wait is the disk's and must not block the loop.
      for (let offset = 0; offset < data.length; ) {
        offset += this.options.fsync ? (await writeAsync(fd, data, offset, data.length - offset)).bytesWritten : writeSync(fd, data, offset, data.length - offset);
      }
      if (this.options.fsync && data.length > 0) await fdatasyncAsync(fd);
      if (fd === this.fd) this.bytes += data.length;
    } catch (error) {
      this.failure = new DatabaseUnavailableError(`writing the write-ahead log ${this.path} failed: ${(error as Error).message}`, error);
    } finally {
      this.writing = false;
      if (fd !== this.fd) closeSync(fd); // rotated away while this batch was being written
    }
  }
}

function openLogFile(path: string, fsync: boolean): number {
  const fd = openSync(path, 'a');
  // A new log's directory entry must be durable before writes to it are acknowledged.
  if (fsync) fsyncDir(dirname(path));
  return fd;
}

/**
 * Reads a log's records in order. When `tolerateTornTail`, a last line that is
 * incomplete or unreadable (a crash cut its append short; it was never
 * acknowledged) is cut off with a warning. Any other damage is an error naming
 * the file and line.
 */
export function readLog(
  path: string,
  tolerateTornTail: boolean,
  onRecord: (record: LogRecord, lineNo: number) => void,
  log: Logger,
): void {
  let bad: { lineNo: number; reason: string } | undefined;
  let goodBytes = 0;
  const corrupt = (lineNo: number, reason: string): Error =>
    new Error(
      `The write-ahead log ${path} is corrupt at line ${lineNo} (${reason}). ` +
        'Only a damaged last line can be repaired automatically; restore the data directory from a backup.',
    );
  const scan = readLines(path, (line, lineNo, endOffset) => {
    if (bad) throw corrupt(bad.lineNo, bad.reason);
    let record: LogRecord;
    try {
      record = decodeRecord(line);
    } catch (error) {
      bad = { lineNo, reason: (error as Error).message };
      return;
    }
    onRecord(record, lineNo);
    goodBytes = endOffset;
  });
  if (bad && scan.partialTail) throw corrupt(bad.lineNo, bad.reason); // damage before the last line
  const last = bad ?? (scan.partialTail ? { lineNo: scan.lines + 1, reason: 'incomplete line' } : undefined);
  if (!last) return;
  if (!tolerateTornTail) throw corrupt(last.lineNo, last.reason);
  truncateSync(path, goodBytes);
  log.warn('cut off a torn last line of the write-ahead log (a write interrupted by a crash, never acknowledged)', {
    file: path,
    line: last.lineNo,
    reason: last.reason,
  });
}
