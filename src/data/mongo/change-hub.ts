/**
 * The change source of the MongoDB driver. Feeders (a change stream, an oplog
 * tailer, a poller) push events into it; it numbers them, hands them to the
 * live queries watching each collection, and tells write fences when a write of
 * this process has come back through the feeder.
 *
 * A write is known by the ids it touched and how many events it must produce
 * (inserted + modified + deleted + upserted, from the write's result); the fence
 * waits until that many events for those ids arrived after the write began.
 * The stand-in servers return no operation time, so ids are what works on all
 * of them; on any server a write the feeder never reports (a no-op the result
 * mis-counted, a document changed twice) is released after `maxWaitMs`.
 *
 * Behind a feed that reports every change in the database's order (change
 * streams), this process's inserts are applied when the database acknowledges
 * them (insertedHere), and the feed's report of each is then dropped: one feed
 * read per insert saved, and the write's fence is met at once.
 */
import { idStringify } from '../../ddp/ids.js';
import type { Logger } from '../../log.js';
import { dataMetrics } from '../data-metrics.js';
import type { ChangeEvent, ChangeListener, ChangeOp, ChangeSource, ChangeSourceKind, DocumentChange } from '../change-source.js';
import type { Document } from '../types.js';

export interface WriteToken {
  collection: string;
  /** idStringify keys of the documents the write touched. */
  keys: string[];
  /** Events the write produces. */
  expect: number;
  /** The hub position when the write began. */
  after: number;
}

export interface ChangeHubOptions {
  /** Longest a write fence waits for the feeder to report a write. */
  maxWaitMs: number;
  log: Logger;
  /** Whether its changes count in perseid_changes_received_total (not for the relay's hub, whose changes are counted where they are applied). */
  counted?: boolean;
}

interface Waiter {
  token: WriteToken;
  seen: number;
  resolve(seq: number): void;
  timer: NodeJS.Timeout;
}

/** How many recent events per collection are remembered, for fences that start waiting late and for the fan-out's order (lastChange). */
const RECENT_LIMIT = 10000;

export class ChangeHub implements ChangeSource {
  private seq = 0;
  private readonly listeners = new Map<string, Set<ChangeListener>>();
  private readonly recent = new Map<string, Array<{ seq: number; key: string }>>();
  /** Per collection, each id `recent` holds: how many of its entries name it, and the kind of the last. */
  private readonly recentIds = new Map<string, Map<string, { entries: number; op: ChangeOp }>>();
  private waiters: Waiter[] = [];
  /** Per collection, the ids of inserts applied by insertedHere whose report from the feed has not come yet. */
  private readonly early = new Map<string, Set<string>>();
  /** Called when the set of watched collections changes, so feeders can adjust what they read. */
  onWatchedChange: (collections: ReadonlySet<string>) => void = () => undefined;
  /** Set by feeders that start receiving a collection's changes some time after it is watched. */
  ready?: (collection: string) => Promise<void>;
  /** Set by feeders that can receive less than a whole collection (see ChangeSource.interest). */
  onInterest: (collection: string, ids: ReadonlySet<string> | 'all') => void = () => undefined;

  interest(collection: string, ids: ReadonlySet<string> | 'all'): void {
    this.onInterest(collection, ids);
  }

  /** Set with `name` when the store chooses how to follow the database. */
  kind: ChangeSourceKind = 'none';

  constructor(
    public name: string,
    private readonly options: ChangeHubOptions,
  ) {}

  get position(): number {
    return this.seq;
  }

  watched(): Set<string> {
    return new Set(this.listeners.keys());
  }

  watch(collection: string, listener: ChangeListener): () => void {
    let set = this.listeners.get(collection);
    const added = !set;
    if (!set) {
      set = new Set();
      this.listeners.set(collection, set);
    }
    set.add(listener);
    if (added) this.onWatchedChange(this.watched());
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(collection) === set) {
        this.listeners.delete(collection);
        // Unwatched, the feed stops reporting it: an id kept here could drop a later insert of another.
        this.early.delete(collection);
        this.onWatchedChange(this.watched());
      }
    };
  }

  /**
   * A document change observed by the feeder. False when it was an insert insertedHere had
   * already applied: the feed's report of it is dropped.
   */
  emit(change: Omit<DocumentChange, 'seq'> & { modifier?: Document }): boolean {
    const key = idStringify(change.id);
    // The feed reports an insert before any later change of the document, so another report
    // for the id means the insert's was missed (a stream started afresh): nothing to drop then.
    if (this.early.get(change.collection)?.delete(key) && change.op === 'insert') return false;
    this.record(change, key);
    return true;
  }

  /**
   * An insert of this process that the database acknowledged, applied now rather than when
   * the feed reports it (see the top of this file). Nothing is applied when the feed already
   * reported it (its read overtook the insert's answer).
   */
  insertedHere(collection: string, id: unknown, doc: Document, after: number): void {
    const key = idStringify(id);
    const recent = this.recent.get(collection) ?? [];
    for (let i = recent.length - 1; i >= 0 && recent[i]!.seq > after; i--) if (recent[i]!.key === key) return;
    if (this.listeners.has(collection)) {
      let early = this.early.get(collection);
      if (!early) this.early.set(collection, (early = new Set()));
      early.add(key);
      // Bounded in case a report never comes (the entries also go when the collection is unwatched or re-read).
      if (early.size > RECENT_LIMIT) early.delete(early.values().next().value!);
    }
    this.record({ collection, op: 'insert', id, doc }, key);
  }

  private record(change: Omit<DocumentChange, 'seq'> & { modifier?: Document }, key: string): void {
    if (this.options.counted !== false) dataMetrics.changesReceived.inc();
    const event = { ...change, seq: ++this.seq } as DocumentChange;
    let recent = this.recent.get(change.collection);
    if (!recent) this.recent.set(change.collection, (recent = []));
    recent.push({ seq: event.seq, key });
    let ids = this.recentIds.get(change.collection);
    if (!ids) this.recentIds.set(change.collection, (ids = new Map()));
    const last = ids.get(key);
    if (last) {
      last.entries++;
      last.op = change.op;
    } else ids.set(key, { entries: 1, op: change.op });
    if (recent.length > RECENT_LIMIT) {
      for (const old of recent.splice(0, recent.length - RECENT_LIMIT)) if (--ids.get(old.key)!.entries === 0) ids.delete(old.key);
    }
    this.deliver(event);
    if (this.waiters.length) this.settleWaiters(change.collection, key, event.seq);
  }

  /** The kind of the last change of `id` among the recent ones (see RECENT_LIMIT), if any. */
  lastChange(collection: string, id: unknown): ChangeOp | undefined {
    return this.recentIds.get(collection)?.get(idStringify(id))?.op;
  }

  /**
   * "Re-read everything" for one collection, or for all watched ones. A `routine` one (a poller's
   * interval, a poller after this process's write) is how that source works, and goes to the debug
   * level: at info it was a line per interval and per write.
   */
  resync(reason: string, collection?: string, routine = false): void {
    const names = (collection ? [collection] : [...this.listeners.keys()]).filter((name) => this.listeners.has(name));
    if (names.length) this.options.log[routine ? 'debug' : 'info']('live queries re-read', { reason, collections: names });
    for (const name of names) this.deliver({ seq: ++this.seq, collection: name, op: 'resync', reason });
    // The re-read holds those inserts; a report of one still to come is applied again, to the same effect.
    for (const name of collection ? [collection] : [...this.early.keys()]) this.early.delete(name);
    // After a gap nothing can be said of pending writes; the re-read covers them.
    for (const waiter of this.waiters.splice(0)) {
      clearTimeout(waiter.timer);
      waiter.resolve(this.seq);
    }
  }

  delivered(token: unknown): number | Promise<number> {
    const t = token as WriteToken;
    if (t.expect <= 0) return this.seq;
    const keys = new Set(t.keys);
    let seen = 0;
    for (const entry of this.recent.get(t.collection) ?? []) if (entry.seq > t.after && keys.has(entry.key)) seen++;
    if (seen >= t.expect) return this.seq;
    return new Promise((resolve) => {
      const waiter: Waiter = {
        token: { ...t, keys: [...keys] },
        seen,
        resolve,
        timer: setTimeout(() => {
          this.waiters = this.waiters.filter((w) => w !== waiter);
          this.options.log.debug('a write was not reported by the change feed in time; releasing its fence', {
            collection: t.collection,
            expected: t.expect,
            seen: waiter.seen,
            feed: this.name,
          });
          resolve(this.seq);
        }, this.options.maxWaitMs),
      };
      this.waiters.push(waiter);
    });
  }

  close(): void {
    for (const waiter of this.waiters.splice(0)) {
      clearTimeout(waiter.timer);
      waiter.resolve(this.seq);
    }
  }

  private deliver(event: ChangeEvent): void {
    const listeners = this.listeners.get(event.collection);
    if (!listeners) return;
    for (const listener of listeners) {
      try {
        listener(event);
      } catch (error) {
        this.options.log.error('a change listener failed', { collection: event.collection, error });
      }
    }
  }

  private settleWaiters(collection: string, key: string, seq: number): void {
    const remaining: Waiter[] = [];
    for (const waiter of this.waiters) {
      if (waiter.token.collection === collection && waiter.token.keys.includes(key) && ++waiter.seen >= waiter.token.expect) {
        clearTimeout(waiter.timer);
        waiter.resolve(seq);
      } else {
        remaining.push(waiter);
      }
    }
    this.waiters = remaining;
  }
}
