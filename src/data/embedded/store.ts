/**
 * The embedded store: the default database, with zero setup. All data lives
 * in memory (documents are immutable, so reads share them without copying)
 * and is made persistent by a write-ahead log with group commit, compacted
 * into snapshots. It is its own change source: the log's records, dispatched
 * in process once durable. Reads see a write once it is in the log; a write
 * the log could not take is undone and reported failed, and writes resume by
 * themselves once the disk takes them again (see wal.ts).
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';
import { createLogger } from '../../log.js';
import type { DocumentChange } from '../change-source.js';
import { DatabaseUnavailableError, type StorageDriver } from '../driver.js';
import { WriteLogChanges } from './changes.js';
import { EmbeddedCollection, type CollectionHost, type Entry } from './collection.js';
import { logFileName } from './files.js';
import { acquireLock } from './lock.js';
import { encodeLine } from './records.js';
import { recover } from './recovery.js';
import { compactFiles } from './snapshot.js';
import { WriteAheadLog } from './wal.js';

const log = createLogger('embedded-store');
const DEFAULT_COMPACT_THRESHOLD_BYTES = 64 * 1024 * 1024;
/** Past this share of the heap limit, warn: a store that outgrows the heap stops the process, then every start. */
const HEAP_WARNING_SHARE = 0.5;

export interface EmbeddedStoreOptions {
  /** The data directory; created if missing. */
  dir: string;
  /**
   * fdatasync every batch before acknowledging it, so that acknowledged writes
   * survive a power loss too. Without it they survive the process crashing.
   */
  fsync?: boolean;
  /** Compact when the log grows past this size and past the last snapshot's. Default 64 MiB. */
  compactThresholdBytes?: number;
  /** After a failed log write, how often to check whether the disk takes writes again. Default 1000 ms. */
  retryMs?: number;
}

export interface EmbeddedStoreStats {
  collections: number;
  documents: number;
  walBytes: number;
  lastSeq: number;
  compactions: number;
}

/** One group-committed write's share of a log batch. */
interface BatchPart {
  entries: readonly Entry[];
  events: DocumentChange[];
  lastSeq: number;
}

export async function openEmbeddedStore(options: EmbeddedStoreOptions): Promise<EmbeddedStore> {
  mkdirSync(options.dir, { recursive: true });
  const release = acquireLock(options.dir);
  try {
    return new EmbeddedStore(options, release);
  } catch (error) {
    release();
    throw error;
  }
}

function changeEvent(seq: number, { mutation, change }: Entry): DocumentChange | undefined {
  if (change === undefined) return undefined;
  if (mutation.op === 'put') return { seq, collection: mutation.collection, op: change, id: mutation.doc._id, doc: mutation.doc };
  if (mutation.op === 'remove') return { seq, collection: mutation.collection, op: change, id: mutation.id };
  return undefined;
}

export class EmbeddedStore implements StorageDriver {
  readonly kind = 'embedded';
  readonly changes: WriteLogChanges;
  private readonly dir: string;
  private readonly compactThresholdBytes: number;
  private readonly collections = new Map<string, EmbeddedCollection>();
  private readonly host: CollectionHost;
  private readonly wal: WriteAheadLog<BatchPart>;
  /** The seq of the last change applied for writers (it may still be on its way to the log). */
  private seq: number;
  /** The seq of the last change in the log: what readers see. */
  private loggedSeq: number;
  private generation: number;
  private snapshotBytes: number;
  private compactions = 0;
  private compacting: Promise<void> | undefined;
  private closing: Promise<void> | undefined;

  /** Use {@link openEmbeddedStore}: the caller must hold the directory's lock. Recovers the directory's contents. */
  constructor(options: EmbeddedStoreOptions, private readonly releaseLock: () => void) {
    this.dir = options.dir;
    this.compactThresholdBytes = options.compactThresholdBytes ?? DEFAULT_COMPACT_THRESHOLD_BYTES;
    this.host = {
      loggedSeq: () => this.loggedSeq,
      assertOpen: () => this.assertOpen(),
      assertWritable: () => this.assertWritable(),
      commit: (entries) => this.commit(entries),
    };
    const started = performance.now();
    const recovered = recover(this.dir, (mutation) => this.collection(mutation.collection).apply(mutation), log);
    this.seq = this.loggedSeq = recovered.lastSeq;
    this.generation = Math.max(recovered.generation, 1);
    this.snapshotBytes = recovered.snapshotBytes;
    this.changes = new WriteLogChanges(this.seq, log);
    this.wal = WriteAheadLog.open(join(this.dir, logFileName(this.generation)), {
      fsync: options.fsync ?? false,
      retryMs: options.retryMs,
      onDurable: (parts) => this.onDurable(parts),
      onFailed: (error) => this.onFailed(error),
      onResumed: () => log.warn('the disk takes writes again: writes resumed', { dir: this.dir }),
    });
    const { collections, documents } = this.stats();
    log.info('opened', { dir: this.dir, collections, documents, lastSeq: this.seq, ms: Math.round(performance.now() - started) });
    this.checkHeap();
  }

  collection(name: string): EmbeddedCollection {
    let collection = this.collections.get(name);
    if (!collection) {
      if (typeof name !== 'string' || name === '' || name.includes('$') || name.includes('\0')) {
        throw new Error(`Invalid collection name ${JSON.stringify(name)}`);
      }
      collection = new EmbeddedCollection(name, this.host);
      this.collections.set(name, collection);
    }
    return collection;
  }

  stats(): EmbeddedStoreStats {
    let collections = 0;
    let documents = 0;
    for (const collection of this.collections.values()) {
      if (collection.isEmpty) continue;
      collections += 1;
      documents += collection.size;
    }
    return { collections, documents, walBytes: this.wal.size, lastSeq: this.seq, compactions: this.compactions };
  }

  /** Why the store cannot take writes now (shown by /health), or undefined when it can. */
  problem(): string | undefined {
    const failure = this.wal.failed;
    return failure && `the embedded store cannot write${this.retryNote()}: ${failure.detail}`;
  }

  /** Writes a snapshot and deletes the log it covers (also done automatically as the log grows). */
  async compact(): Promise<void> {
    this.assertWritable();
    await (this.compacting ??= this.runCompaction().finally(() => {
      this.compacting = undefined;
    }));
  }

  /** Flushes pending writes (their events are still dispatched), then stops and releases the directory. */
  close(): Promise<void> {
    return (this.closing ??= this.shutdown());
  }

  private async shutdown(): Promise<void> {
    try {
      await this.compacting?.catch(() => undefined); // its failure was reported to whoever started it
      await this.wal.close();
    } finally {
      this.changes.close();
      this.releaseLock();
      log.info('closed', { dir: this.dir, lastSeq: this.seq });
    }
  }

  private assertOpen(): void {
    if (this.closing) throw new Error(`The embedded store at ${this.dir} is closed`);
  }

  private assertWritable(): void {
    this.assertOpen();
    const failure = this.wal.failed;
    if (failure) throw new DatabaseUnavailableError(`the embedded store at ${this.dir} cannot write now${this.retryNote()}: ${failure.detail}`, failure);
  }

  private retryNote(): string {
    return this.wal.retrying ? ' (it retries by itself)' : '';
  }

  /** Numbers applied mutations and queues them for the next log batch; resolves with the write's token. */
  private commit(entries: readonly Entry[]): Promise<number> {
    if (this.wal.failed) {
      // Unreachable in practice (writers check first, in the same turn); never leave applied mutations unlogged.
      this.undoUnlogged();
      return Promise.reject(this.wal.failed);
    }
    let text = '';
    const events: DocumentChange[] = [];
    for (const [i, entry] of entries.entries()) {
      const seq = ++this.seq;
      text += encodeLine(i < entries.length - 1 ? { seq, ...entry.mutation, more: true } : { seq, ...entry.mutation });
      const event = changeEvent(seq, entry);
      if (event) events.push(event);
    }
    const token = this.seq;
    return this.wal.append(text, { entries, events, lastSeq: token }).then(() => token);
  }

  private onDurable(parts: readonly BatchPart[]): void {
    for (const { entries, events, lastSeq } of parts) {
      for (const entry of entries) entry.logged();
      this.loggedSeq = lastSeq;
      this.changes.dispatch(events, lastSeq);
    }
    const size = this.wal.size;
    if (!this.closing && !this.compacting && size > this.compactThresholdBytes && size > this.snapshotBytes) {
      this.compact().catch((error: unknown) => log.error('compaction failed', { dir: this.dir, error }));
    }
  }

  /** A batch failed, and with it every write not yet logged: undo them all. */
  private onFailed(error: DatabaseUnavailableError): void {
    const until = this.wal.retrying ? ' until the disk takes them again' : '';
    log.error(`a write to the log failed: writes are refused${until}`, { dir: this.dir, error: error.detail });
    this.undoUnlogged();
  }

  private undoUnlogged(): void {
    for (const collection of this.collections.values()) collection.rollback();
    this.seq = this.loggedSeq;
  }

  private async runCompaction(): Promise<void> {
    const started = performance.now();
    // Between two batches, the logged state is exactly what the current log
    // file ends with: the snapshot takes it, and the log switches there, so
    // the older logs hold only records the snapshot covers.
    const { seq, images } = await this.wal.atBoundary(() => {
      const images = [...this.collections.values()].map((c) => c.image()).filter((image) => image.docs.length > 0 || image.indexes.length > 0);
      this.wal.rotate(join(this.dir, logFileName(this.generation + 1)));
      this.generation += 1;
      return { seq: this.loggedSeq, images };
    });
    this.snapshotBytes = await compactFiles(this.dir, seq, images, this.generation);
    this.compactions += 1;
    log.info('compacted', { dir: this.dir, seq, bytes: this.snapshotBytes, ms: Math.round(performance.now() - started) });
    this.checkHeap();
  }

  /** Checked on opening and after each compaction (every 64 MiB of log by default), so the warning comes before the crash. */
  private checkHeap(): void {
    const { used_heap_size: used, heap_size_limit: limit } = getHeapStatistics();
    if (used <= limit * HEAP_WARNING_SHARE) return;
    const mib = (bytes: number): number => Math.round(bytes / (1 << 20));
    log.warn(
      'more than half of the heap is in use, and the embedded store keeps every document in memory: past the limit the server stops with an out-of-memory error, at every start too. Raise the limit (NODE_OPTIONS=--max-old-space-size=<MiB>) or move to MongoDB (MONGO_URL)',
      { dir: this.dir, heapUsedMiB: mib(used), heapLimitMiB: mib(limit), documents: this.stats().documents },
    );
  }
}
