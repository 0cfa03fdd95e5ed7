/**
 * Feeds the change hub from MongoDB change streams: one stream for the whole
 * database, filtered on the server to the collections that have live queries
 * (reopened, from its resume token, when that set changes), or, where the
 * server only streams single collections (mongo-java-server), one stream per
 * watched collection. A stream that fails is resumed from its token, and the
 * live queries of its collections re-read (a server without the history
 * resumes from now), as after the driver resumed a stream by itself.
 *
 * Each stream is read by a loop of tryNext(): MongoDB holds an empty read open
 * (awaitData), but mongo-java-server answers it at once, and the driver's own
 * event loop then spins a core; so an empty read that came back quickly is
 * followed by a pause (20 ms, growing to 200 ms while idle; cut short by an
 * update or remove of this process, whose fence waits for its report; its
 * inserts are applied at once, see ChangeHub.insertedHere). Whether the server waits is judged on every empty
 * read, so a read made slow by this process's own busy turn does not start a
 * spin.
 */
import type { ChangeStream, ChangeStreamDocument, Document as BsonDocument, MongoClient } from 'mongodb';
import type { Logger } from '../../log.js';
import type { Document } from '../types.js';
import type { ChangeHub } from './change-hub.js';
import type { ClientHolder } from './client-holder.js';
import { fromMongo, fromMongoDocument } from './values.js';

export type StreamScope = 'database' | 'collection';

const RETRY_MS = [100, 500, 2000, 5000];
/**
 * Errors that resuming from the same token would only repeat: the stream starts afresh (its live queries re-read).
 * InvalidResumeToken, ChangeStreamFatalError, ChangeStreamHistoryLost, and BSONObjectTooLarge (a change event over 16 MiB,
 * which the server fails at every resume before it).
 */
const HISTORY_LOST = new Set([260, 280, 286, 10334]);

interface OpenStream {
  stream: ChangeStream;
  /** The client the stream was opened on. */
  client: MongoClient;
  /** Resolves after the stream's first round trip: true when the server accepted it, false when it failed. */
  opened: Promise<boolean>;
  /** Ends a pause between empty reads early. */
  wake(): void;
}

const QUICK_EMPTY_MS = 50;

/**
 * Events the stream already holds from its last read. The driver keeps its
 * cursor internal; without it we read again, which costs one more round trip.
 */
function buffered(stream: ChangeStream): number {
  const cursor = (stream as unknown as { cursor?: { bufferedCount?(): number } }).cursor;
  return typeof cursor?.bufferedCount === 'function' ? cursor.bufferedCount() : 1;
}
/** The driver's cursor under a stream: it replaces it when it resumes the stream by itself. */
function cursorOf(stream: ChangeStream): unknown {
  return (stream as unknown as { cursor?: unknown }).cursor;
}

const MIN_PAUSE_MS = 20;
const MAX_PAUSE_MS = 200;

/** Turns an update description into a modifier our copies can take ($set / $unset with dotted paths). */
function modifierOf(description: { updatedFields?: BsonDocument; removedFields?: string[]; truncatedArrays?: unknown[] } | undefined): Document | undefined {
  if (!description || (description.truncatedArrays && description.truncatedArrays.length > 0)) return undefined;
  const modifier: Document = {};
  if (description.updatedFields && Object.keys(description.updatedFields).length) modifier.$set = fromMongo(description.updatedFields);
  if (description.removedFields?.length) modifier.$unset = Object.fromEntries(description.removedFields.map((f) => [f, '']));
  return Object.keys(modifier).length ? modifier : undefined;
}

export class ChangeStreamFeeder {
  private readonly streams = new Map<string, OpenStream>();
  /** Streams that failed, waiting out their retry pause, with what reopens them. */
  private readonly pending = new Map<string, { timer: NodeJS.Timeout; reopen(): void }>();
  /** Resume token per stream ('' is the database stream). */
  private readonly tokens = new Map<string, unknown>();
  private reopenTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private failures = 0;
  /** A stream failed and none has opened since: later failures of the same outage are not logged again. */
  private failing = false;
  private readonly unsubscribe: () => void;
  private readonly unsubscribeRecovered: () => void;

  constructor(
    private readonly clients: ClientHolder,
    private readonly hub: ChangeHub,
    private readonly scope: StreamScope,
    private readonly log: Logger,
  ) {
    hub.onWatchedChange = (collections) => this.adjust(collections);
    this.unsubscribe = clients.onReplaced(() => this.restart());
    // The database answers again (a live query's re-read, a write): streams waiting out a retry pause reopen now.
    this.unsubscribeRecovered = clients.onRecovered(() => this.reopenNow());
  }

  /** Resolves once changes of `collection` are being streamed (live queries read only after that, so none is missed). */
  async streaming(collection: string): Promise<void> {
    const key = this.scope === 'database' ? '' : collection;
    for (let i = 0; i < 100 && !this.streams.has(key); i++) await new Promise((r) => setTimeout(r, 5));
    await this.streams.get(key)?.opened;
  }

  /** Reopens the streams waiting out a retry pause (up to 5 s). */
  private reopenNow(): void {
    for (const { reopen } of [...this.pending.values()]) reopen();
  }

  close(): void {
    this.closed = true;
    this.unsubscribe();
    this.unsubscribeRecovered();
    clearTimeout(this.reopenTimer);
    for (const { timer } of this.pending.values()) clearTimeout(timer);
    this.pending.clear();
    for (const { stream } of this.streams.values()) void stream.close().catch(() => undefined);
    this.streams.clear();
  }

  private adjust(collections: ReadonlySet<string>): void {
    if (this.closed) return;
    if (this.scope === 'database') {
      this.reopen('');
      return;
    }
    for (const name of collections) if (!this.streams.has(name) && !this.pending.has(name)) this.open(name);
    for (const [name, { stream }] of this.streams) {
      if (!collections.has(name)) {
        this.streams.delete(name);
        this.tokens.delete(name);
        void stream.close().catch(() => undefined);
      }
    }
  }

  /** Replaces the database stream (debounced), resuming where the old one stopped. */
  private reopen(key: string): void {
    clearTimeout(this.reopenTimer);
    this.reopenTimer = setTimeout(() => {
      const old = this.streams.get(key);
      this.streams.delete(key);
      if (old) void old.stream.close().catch(() => undefined);
      if (this.scope === 'database' && this.hub.watched().size === 0) return;
      this.open(key);
    }, 10);
  }

  private open(key: string): void {
    const watched = [...this.hub.watched()];
    const pipeline = this.scope === 'database' ? [{ $match: { 'ns.coll': { $in: watched } } }] : [];
    const options: BsonDocument = {};
    // mongo-java-server's update events carry no usable id without the looked-up document.
    if (this.scope === 'collection') options.fullDocument = 'updateLookup';
    const token = this.tokens.get(key);
    if (token) options.startAfter = token;
    const { client, db } = this.clients;
    const stream = (this.scope === 'database' ? db.watch(pipeline, options) : db.collection(key).watch(pipeline, options)) as ChangeStream;
    let markOpened!: (accepted: boolean) => void;
    const opened = new Promise<boolean>((resolve) => (markOpened = resolve));
    let wakeTimer: (() => void) | undefined;
    const entry: OpenStream = { stream, client, opened, wake: () => wakeTimer?.() };
    this.streams.set(key, entry);
    void this.pump(key, entry, markOpened, (wake) => (wakeTimer = wake));
  }

  /** Wakes the streams of `collection` now (this process just wrote to it). */
  poke(collection: string): void {
    this.streams.get(this.scope === 'database' ? '' : collection)?.wake();
  }

  private async pump(key: string, entry: OpenStream, markOpened: (accepted: boolean) => void, setWake: (wake: () => void) => void): Promise<void> {
    const { stream } = entry;
    // MongoDB holds an empty read open until data comes (awaitData): then there is no need to pause.
    let serverWaits = false;
    let pause = MIN_PAUSE_MS;
    let woken = false;
    /** Whether a read since the last pause found a change not already applied here. */
    let news = false;
    let cursor = cursorOf(stream);
    try {
      while (!this.closed && this.streams.get(key) === entry) {
        const started = Date.now();
        const event = await stream.tryNext();
        this.clients.succeeded(entry.client);
        markOpened(true);
        this.failing = false;
        if (cursorOf(stream) !== cursor) {
          // The driver resumed the stream after a resumable error (its cursor was killed, a
          // failover): as after a reopen of ours, a server without the history resumes from now.
          cursor = cursorOf(stream);
          this.hub.resync('change stream resumed by the driver', this.scope === 'database' ? undefined : key);
        }
        if (event) {
          this.failures = 0;
          // Our own updates and removes wake this loop anyway, and our inserts were applied
          // already; only changes made by others keep the pause short.
          this.tokens.set(key, event._id);
          if (this.handle(event as ChangeStreamDocument, key)) {
            news = true;
            if (!woken) pause = MIN_PAUSE_MS;
          }
          if (buffered(stream) > 0) continue;
        } else {
          // Judged again on every empty read: one that was slow only because this
          // process was busy (start-up, a long turn) must not leave the loop spinning
          // against a server that answers at once.
          serverWaits = Date.now() - started >= QUICK_EMPTY_MS;
        }
        if (serverWaits) continue;
        // A server that answers at once (mongo-java-server): read again after a pause that
        // grows while nothing new comes, or as soon as this process updates or removes.
        woken = await new Promise<boolean>((resolve) => {
          const timer = setTimeout(() => resolve(false), pause);
          setWake(() => {
            clearTimeout(timer);
            resolve(true);
          });
        });
        if (!news || woken) pause = Math.min(MAX_PAUSE_MS, pause * 2);
        news = false;
      }
    } catch (error) {
      markOpened(false);
      this.clients.failed(error, entry.client);
      this.failed(key, stream, error as Error & { code?: number });
    }
  }

  /** False when the event was this process's insert, already applied (ChangeHub.insertedHere). */
  private handle(event: ChangeStreamDocument, key: string): boolean {
    const collection = 'ns' in event && event.ns && 'coll' in event.ns ? event.ns.coll : key;
    switch (event.operationType) {
      case 'insert':
        return this.hub.emit({ collection, op: 'insert', id: fromMongo(event.documentKey._id), doc: fromMongoDocument(event.fullDocument) });
      case 'replace':
      case 'update': {
        const full = event.fullDocument ? fromMongoDocument(event.fullDocument) : undefined;
        // mongo-java-server puts the update spec in documentKey; the looked-up document has the id.
        const keyDoc = event.documentKey as BsonDocument | undefined;
        const id = keyDoc && '_id' in keyDoc ? fromMongo(keyDoc._id) : full?._id;
        if (id === undefined) {
          this.hub.resync('an update event without a document id', collection);
          return true;
        }
        if (full) this.hub.emit({ collection, op: 'update', id, doc: full });
        else this.hub.emit({ collection, op: 'update', id, modifier: event.operationType === 'update' ? modifierOf(event.updateDescription) : undefined });
        return true;
      }
      case 'delete':
        this.hub.emit({ collection, op: 'remove', id: fromMongo(event.documentKey._id) });
        return true;
      case 'drop':
      case 'rename':
      case 'dropDatabase':
      case 'invalidate':
        this.hub.resync(`change stream ${event.operationType}`, this.scope === 'database' ? undefined : collection);
        if (event.operationType === 'invalidate') this.retry(key, true);
        return true;
      default:
        return true;
    }
  }

  private failed(key: string, stream: ChangeStream, error: Error & { code?: number }): void {
    if (this.closed || this.streams.get(key)?.stream !== stream) return;
    const historyLost = error.code !== undefined && HISTORY_LOST.has(error.code);
    // Once per outage: while the database is down every retry fails the same way.
    const details = { collection: key || '(database)', error: error.message, resume: !historyLost };
    if (this.failing) this.log.debug('change stream failed again; reopening it', details);
    else this.log.warn('change stream failed; reopening it', details);
    this.failing = true;
    this.retry(key, historyLost);
  }

  /** The store's client was replaced: every stream reopens on the new one, from its resume token, and its live queries re-read. */
  private restart(): void {
    if (this.closed) return;
    for (const key of [...this.streams.keys()]) {
      const entry = this.streams.get(key)!;
      this.streams.delete(key);
      void entry.stream.close().catch(() => undefined);
      this.open(key);
      void this.streams.get(key)?.opened.then((accepted) => accepted && this.hub.resync('database client replaced', this.scope === 'database' ? undefined : key));
    }
  }

  private retry(key: string, fresh: boolean): void {
    const entry = this.streams.get(key);
    this.streams.delete(key);
    if (entry) void entry.stream.close().catch(() => undefined);
    if (fresh) this.tokens.delete(key);
    const delay = RETRY_MS[Math.min(this.failures++, RETRY_MS.length - 1)]!;
    clearTimeout(this.pending.get(key)?.timer);
    const reopen = () => {
      clearTimeout(timer);
      this.pending.delete(key);
      // A collection no longer watched meanwhile stays closed.
      if (this.closed || (this.scope === 'collection' && !this.hub.watched().has(key))) return;
      this.open(key);
      // The resume token avoids a gap on a healthy replica set, but a server that
      // restarted without its history resumes silently from nowhere: re-read as
      // well, once the new stream is open, so nothing is missed either way. A stream that
      // failed again (the database still down) retries, and re-reads when one opens.
      void this.streams.get(key)?.opened.then((accepted) => accepted && this.hub.resync(fresh ? 'change stream history lost' : 'change stream reopened', this.scope === 'database' ? undefined : key));
    };
    const timer = setTimeout(reopen, delay).unref();
    this.pending.set(key, { timer, reopen });
  }
}
