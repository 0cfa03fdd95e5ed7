/**
 * Feeds the change hub by tailing the replica set's oplog (`local.oplog.rs` on
 * MONGO_OPLOG_URL), as Meteor's oplog driver does.
 *
 * The stand-ins close tailable cursors after every batch, so this re-reads on a
 * short interval: right after this process writes, and at most `intervalMs`
 * later otherwise, backing off while nothing happens. Each read starts a second
 * before the newest entry seen and skips entries already seen, because FerretDB
 * may commit entries out of timestamp order; an entry found after a newer one
 * only makes the live queries read its document again. The newest entry applied
 * is among those read again: when it is gone, the oplog (capped) rolled past
 * this tailer, the entries it had not read are lost, and live queries re-read.
 * Entry shapes handled: inserts,
 * deletes, updates as operators ($set, $inc, ...), as MongoDB 5's `$v: 2`
 * diffs, as replacements, and FerretDB's whole-document `$set`; drops re-read.
 */
import { Timestamp, type Document as BsonDocument } from 'mongodb';
import type { Logger } from '../../log.js';
import type { Document } from '../types.js';
import type { ChangeHub } from './change-hub.js';
import type { ClientHolder } from './client-holder.js';
import { fromMongo, fromMongoDocument } from './values.js';

export interface OplogFeederOptions {
  /** Longest pause between two reads when nothing happens (ms). */
  maxIntervalMs: number;
  /** Pause after a read that found entries (ms). */
  minIntervalMs: number;
}

interface OplogEntry {
  _id?: unknown;
  ts: Timestamp;
  op: 'i' | 'u' | 'd' | 'c' | 'n';
  ns: string;
  o: BsonDocument;
  o2?: BsonDocument;
}

/** MongoDB 5's `$v: 2` update diff as $set/$unset; undefined when it touches arrays (then the document is read). */
export function diffToModifier(diff: BsonDocument, prefix = '', out: { $set: BsonDocument; $unset: BsonDocument } = { $set: {}, $unset: {} }): typeof out | undefined {
  for (const [key, value] of Object.entries(diff)) {
    if (key === 'u' || key === 'i') for (const [field, v] of Object.entries(value as BsonDocument)) out.$set[prefix + field] = v;
    else if (key === 'd') for (const field of Object.keys(value as BsonDocument)) out.$unset[prefix + field] = '';
    else if (key.startsWith('s')) {
      const sub = value as BsonDocument;
      if (sub.a === true) return undefined;
      if (!diffToModifier(sub, `${prefix}${key.slice(1)}.`, out)) return undefined;
    } else if (key !== 'a') return undefined;
  }
  return out;
}

/** The collection an entry's namespace (`db.collection`) names. */
function collectionOf(entry: OplogEntry): string {
  return entry.ns.slice(entry.ns.indexOf('.') + 1);
}

/** The key an entry is known by when read again. */
function keyOf(entry: OplogEntry): string {
  return entry._id === undefined ? `${entry.ts.toString()}:${JSON.stringify(entry.o2 ?? entry.o)}` : String(entry._id);
}

export class OplogFeeder {
  private lastTs: Timestamp | undefined;
  /** The entry at lastTs, once one was applied: each read must find it again (see read()). */
  private lastEntry: { key: string; ns: string } | undefined;
  /** Entries read in the overlap window, by _id, with their time, to skip them when read again. */
  private readonly seen = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private reading = false;
  private again = false;
  private idle = 0;
  private closed = false;
  private failing = false;

  constructor(
    /** The oplog's client; reads go through it, so a replaced client is used from the next read on, from the same position. */
    private readonly clients: ClientHolder,
    private readonly dbName: string,
    private readonly hub: ChangeHub,
    private readonly options: OplogFeederOptions,
    private readonly log: Logger,
  ) {
    hub.onWatchedChange = () => this.poke();
  }

  private get oplog() {
    return this.clients.collection('oplog.rs');
  }

  /** Starts after the newest entry; nothing older is replayed. */
  async start(): Promise<void> {
    const [newest] = await this.clients.run(() => this.oplog.find({}, { sort: { $natural: -1 }, limit: 1, projection: { ts: 1 } }).toArray());
    this.lastTs = (newest?.ts as Timestamp | undefined) ?? new Timestamp({ t: Math.floor(Date.now() / 1000), i: 0 });
    this.schedule(0);
  }

  /** Reads now (after a write of this process, or a new collection to watch). */
  poke(_collection?: string): void {
    this.idle = 0;
    if (this.reading) this.again = true;
    else this.schedule(0);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }

  private schedule(ms: number): void {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.read(), ms);
    this.timer.unref();
  }

  private async read(): Promise<void> {
    if (this.closed || this.reading) return;
    this.reading = true;
    let found = 0;
    try {
      const watched = [...this.hub.watched()];
      if (watched.length > 0 && this.lastTs) {
        const since = new Timestamp({ t: Math.max(0, this.lastTs.high - 1), i: 0 });
        const namespaces = [...watched.map((c) => `${this.dbName}.${c}`), `${this.dbName}.$cmd`];
        const entries = (await this.clients.run(() => this.oplog.find({ ts: { $gt: since }, ns: { $in: namespaces } }).toArray())) as unknown as OplogEntry[];
        entries.sort((a, b) => a.ts.compare(b.ts));
        // After a failed read everything is re-read anyway (below).
        if (!this.failing) this.checkPosition(entries, namespaces);
        for (const entry of entries) {
          const key = keyOf(entry);
          if (this.seen.has(key)) continue;
          this.seen.set(key, entry.ts.high);
          if (entry.ts.greaterThan(this.lastTs)) {
            this.lastTs = entry.ts;
            this.lastEntry = { key, ns: entry.ns };
            this.apply(entry);
          } else this.applyLate(entry);
          found++;
        }
        for (const [key, t] of this.seen) if (t < this.lastTs.high - 2) this.seen.delete(key);
      }
      if (this.failing) {
        this.failing = false;
        this.log.info('oplog readable again; live queries re-read what they may have missed');
        this.hub.resync('oplog reconnected');
      }
    } catch (error) {
      if (!this.failing) this.log.warn('reading the oplog failed; retrying', { error: (error as Error).message });
      this.failing = true;
    } finally {
      this.reading = false;
    }
    this.idle = found > 0 ? 0 : this.idle + 1;
    const pause = this.again ? 0 : Math.min(this.options.maxIntervalMs, this.options.minIntervalMs * 2 ** Math.min(this.idle, 8));
    this.again = false;
    this.schedule(this.failing ? 1000 : pause);
  }

  /**
   * The read starts before the newest entry applied, so it finds that entry again unless the
   * oplog dropped it: a capped oplog that filled up faster than this tailer read (a burst of
   * writes, a process paused) drops its oldest entries, and whatever this tailer had not read
   * of them is lost without a trace. Live queries re-read instead of missing those changes for good.
   */
  private checkPosition(entries: OplogEntry[], namespaces: string[]): void {
    const last = this.lastEntry;
    // An entry of a collection no longer watched is not read again: nothing to tell from it.
    if (!last || !namespaces.includes(last.ns) || entries.some((entry) => keyOf(entry) === last.key)) return;
    this.lastEntry = undefined;
    this.log.warn('the oplog no longer holds the last entry read (it rolled past this process); live queries re-read what they may have missed');
    this.hub.resync('oplog rolled past its last position');
  }

  /**
   * An entry older than one already applied, committed after it: applied now, it would undo the
   * newer change (an insert found after its document's delete would bring it back). The live
   * queries read the document again instead.
   */
  private applyLate(entry: OplogEntry): void {
    if (entry.op !== 'i' && entry.op !== 'u' && entry.op !== 'd') {
      this.apply(entry);
      return;
    }
    const collection = collectionOf(entry);
    this.hub.emit({ collection, op: 'update', id: fromMongo(entry.op === 'u' ? entry.o2?._id : entry.o._id) });
  }

  private apply(entry: OplogEntry): void {
    const collection = collectionOf(entry);
    switch (entry.op) {
      case 'i':
        this.hub.emit({ collection, op: 'insert', id: fromMongo(entry.o._id), doc: fromMongoDocument(entry.o) });
        return;
      case 'd':
        this.hub.emit({ collection, op: 'remove', id: fromMongo(entry.o._id) });
        return;
      case 'u': {
        const id = fromMongo(entry.o2?._id);
        const { $v, ...update } = entry.o;
        const keys = Object.keys(update);
        if (keys.length > 0 && keys.every((k) => !k.startsWith('$'))) {
          this.hub.emit({ collection, op: 'update', id, doc: fromMongoDocument(update) }); // a replacement
        } else if ($v === 2 && update.diff) {
          const modifier = diffToModifier(update.diff as BsonDocument);
          this.hub.emit({ collection, op: 'update', id, modifier: modifier && (fromMongo(modifier) as Document) });
        } else if (keys.length === 1 && keys[0] === '$set' && (update.$set as BsonDocument)._id !== undefined) {
          // FerretDB logs every update as a $set of the whole new document.
          this.hub.emit({ collection, op: 'update', id, doc: fromMongoDocument(update.$set as BsonDocument) });
        } else {
          this.hub.emit({ collection, op: 'update', id, modifier: fromMongo(update) as Document });
        }
        return;
      }
      case 'c':
        if (entry.o.drop) this.hub.resync('collection dropped', String(entry.o.drop));
        else if (entry.o.dropDatabase) this.hub.resync('database dropped');
        return;
      default:
        return;
    }
  }
}
