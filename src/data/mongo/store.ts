/**
 * MongoDB behind the storage seam, through the official driver (pooled, with
 * the driver's own retry settings). Live queries are fed by the best change
 * source the deployment has, chosen at start and overridable:
 *
 * - `change-stream`: MongoDB change streams (a replica set or sharded cluster);
 * - `oplog`: tailing `local.oplog.rs` on MONGO_OPLOG_URL, as Meteor apps do;
 * - `poll`: re-reading on an interval and after this process's writes.
 *
 * `auto` (the default): the oplog when MONGO_OPLOG_URL is set, else change
 * streams when a probe shows the server delivers them, else polling.
 */
import { MongoClient, MongoNetworkError, MongoNotConnectedError, MongoServerSelectionError, type Db } from 'mongodb';
import { createLogger, type Logger } from '../../log.js';
import { liveQueryMetrics } from '../../metrics/live-queries.js';
import { DatabaseUnavailableError, type StorageDriver } from '../driver.js';
import { ChangeHub } from './change-hub.js';
import { ChangeStreamFeeder, type StreamScope } from './change-stream-feeder.js';
import { MongoCollection } from './collection.js';
import { OplogFeeder } from './oplog-feeder.js';
import { PollFeeder } from './poll-feeder.js';

export type ChangeSourceChoice = 'auto' | 'change-stream' | 'oplog' | 'poll';

export interface MongoStoreOptions {
  url: string;
  /** The oplog's database URL (`.../local`), for oplog tailing. */
  oplogUrl?: string;
  changeSource?: ChangeSourceChoice;
  /** Re-read interval of polled collections (Meteor: 10 s). */
  pollIntervalMs?: number;
  /** Longest a method's `updated` waits for its writes to come back through the feed (Meteor: 1 s). */
  fenceTimeoutMs?: number;
  /** How long operations wait for a reachable server before failing. */
  serverSelectionTimeoutMs?: number;
}

const PROBE_COLLECTION = 'perseid_change_probe';

/** Whether a stream opened by `open` delivers a write made after it opened, within `ms`. */
async function streamDelivers(db: Db, scope: StreamScope, ms: number): Promise<boolean> {
  const probe = db.collection(PROBE_COLLECTION);
  let stream;
  try {
    stream = scope === 'database' ? db.watch([{ $match: { 'ns.coll': PROBE_COLLECTION } }]) : probe.watch();
    const event = stream.tryNext().then(async function next(first): Promise<unknown> {
      return first ?? (stream!.closed ? undefined : next(await stream!.tryNext()));
    });
    // tryNext() has opened the stream on the server once its first round trip is back.
    await Promise.race([event, new Promise((r) => setTimeout(r, 200))]);
    await probe.insertOne({ at: new Date() });
    const seen = await Promise.race([event.then(Boolean), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
    return seen;
  } catch {
    return false;
  } finally {
    await stream?.close().catch(() => undefined);
  }
}

export class MongoStore implements StorageDriver {
  readonly kind = 'mongo';
  readonly changes: ChangeHub;
  private readonly collections = new Map<string, MongoCollection>();
  private feeder: ChangeStreamFeeder | OplogFeeder | PollFeeder | undefined;
  private tracksIds = true;
  readonly log: Logger;

  private constructor(
    readonly client: MongoClient,
    private readonly db: Db,
    private readonly oplogClient: MongoClient | undefined,
    private readonly options: MongoStoreOptions,
  ) {
    this.log = createLogger('mongo');
    this.changes = new ChangeHub('none', { maxWaitMs: options.fenceTimeoutMs ?? 1000, log: this.log });
  }

  static async open(options: MongoStoreOptions): Promise<MongoStore> {
    const log = createLogger('mongo');
    const serverSelectionTimeoutMS = options.serverSelectionTimeoutMs ?? 10000;
    const client = new MongoClient(options.url, { serverSelectionTimeoutMS });
    await client.connect();
    const oplogUrl = options.oplogUrl;
    const oplogClient = oplogUrl ? new MongoClient(oplogUrl, { serverSelectionTimeoutMS }) : undefined;
    await oplogClient?.connect();
    const store = new MongoStore(client, client.db(), oplogClient, options);
    await store.chooseSource(options.changeSource ?? 'auto');
    store.resyncAfterOutages();
    log.info('connected', { database: store.db.databaseName, changes: store.changes.name });
    return store;
  }

  get databaseName(): string {
    return this.db.databaseName;
  }

  collection(name: string): MongoCollection {
    let collection = this.collections.get(name);
    if (!collection) {
      collection = new MongoCollection(name, this.db.collection(name), {
        hub: this.changes,
        tracksIds: this.tracksIds,
        ownWrite: (c) => this.ownWrite(c),
        countRead: (n) => liveQueryMetrics.databaseReads.inc(n),
        translate: (error) => this.translate(error),
      });
      this.collections.set(name, collection);
    }
    return collection;
  }

  async close(): Promise<void> {
    this.feeder?.close();
    this.changes.close();
    await this.client.close();
    await this.oplogClient?.close();
  }

  /**
   * A server that was unreachable and is back may have lost or changed anything
   * meanwhile (a restart, a failover); a resumed feed cannot tell. Every live
   * query re-reads and clients converge.
   */
  private resyncAfterOutages(): void {
    // A quick restart can pass between two heartbeats; its trace is connections
    // failing. Once they stop failing for a moment, re-read.
    let settle: NodeJS.Timeout | undefined;
    this.client.on('connectionClosed', (event) => {
      if (event.reason !== 'error') return;
      clearTimeout(settle);
      settle = setTimeout(() => this.changes.resync('database connections failed'), 500);
      settle.unref();
    });
    this.client.on('serverDescriptionChanged', (event) => {
      const was = event.previousDescription.type;
      const now = event.newDescription.type;
      if (was === 'Unknown' && now !== 'Unknown') {
        this.log.info('database reachable again; live queries re-read', { server: event.address });
        this.changes.resync('database reconnected');
      } else if (was !== 'Unknown' && now === 'Unknown') {
        this.log.warn('database unreachable', { server: event.address, error: event.newDescription.error?.message });
      }
    });
  }

  private ownWrite(collection: string): void {
    if (this.feeder instanceof PollFeeder) this.feeder.ownWrite(collection);
    else if (this.feeder instanceof OplogFeeder) this.feeder.poke();
    else this.feeder?.poke(collection);
  }

  private translate(error: unknown): Error {
    if (error instanceof MongoServerSelectionError || error instanceof MongoNetworkError || error instanceof MongoNotConnectedError) {
      return new DatabaseUnavailableError((error as Error).message, error);
    }
    return error instanceof Error ? error : new Error(String(error));
  }

  private async chooseSource(choice: ChangeSourceChoice): Promise<void> {
    const why = (source: string, reason: string) => {
      this.changes.name = source;
      this.log.info(`live queries follow ${source}`, { why: reason });
    };
    if (choice === 'oplog' || (choice === 'auto' && this.oplogClient)) {
      if (!this.oplogClient) throw new Error('The oplog change source needs MONGO_OPLOG_URL');
      const feeder = new OplogFeeder(this.oplogClient.db().collection('oplog.rs'), this.db.databaseName, this.changes, { minIntervalMs: 20, maxIntervalMs: 200 }, this.log);
      await feeder.start();
      this.feeder = feeder;
      why('oplog tailing', choice === 'oplog' ? 'chosen' : 'MONGO_OPLOG_URL is set');
      return;
    }
    if (choice === 'change-stream' || choice === 'auto') {
      const scope: StreamScope | undefined = (await streamDelivers(this.db, 'database', 1500))
        ? 'database'
        : (await streamDelivers(this.db, 'collection', 1500))
          ? 'collection'
          : undefined;
      await this.db.collection(PROBE_COLLECTION).drop().catch(() => undefined);
      if (scope) {
        const feeder = new ChangeStreamFeeder(this.db, this.changes, scope, this.log);
        this.changes.ready = (collection) => feeder.streaming(collection);
        this.feeder = feeder;
        why(scope === 'database' ? 'a database change stream' : 'per-collection change streams', scope === 'database' ? 'the server streams database changes' : 'the server streams collection changes only');
        return;
      }
      if (choice === 'change-stream') throw new Error('This MongoDB server does not deliver change streams (a replica set is needed)');
    }
    this.tracksIds = false;
    this.feeder = new PollFeeder(this.changes, this.options.pollIntervalMs ?? 10000);
    why('polling', choice === 'poll' ? 'chosen' : 'no change streams and no MONGO_OPLOG_URL');
  }
}

export function openMongoStore(options: MongoStoreOptions): Promise<MongoStore> {
  return MongoStore.open(options);
}
