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
import { apm } from '../../metrics/apm.js';
import type { MongoClient } from 'mongodb';
import { createLogger, type Logger } from '../../log.js';
import type { ChangeSourceKind } from '../change-source.js';
import { dataMetrics } from '../data-metrics.js';
import { DatabaseUnavailableError, type StorageDriver } from '../driver.js';
import type { FanoutBus } from '../../fanout/bus.js';
import type { Lease } from '../../coordination/lease.js';
import type { WatchedCollections } from '../../fanout/watched-collections.js';
import { ChangeHub } from './change-hub.js';
import { ClientHolder, isUnavailable } from './client-holder.js';
import { connectMongo } from './connect.js';
import { MongoCollection } from './collection.js';
import { FanoutFeeder } from './fanout-feeder.js';
import { openDatabaseFeeder, type DatabaseFeeder } from './feeders.js';
import { IpcFeeder, type FeedLink } from './ipc-feeder.js';
import { Relay } from './relay.js';

export type ChangeSourceChoice = 'auto' | 'change-stream' | 'oplog' | 'poll' | 'ipc';

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
  /**
   * An operation with no answer after this long fails with 503 (default 30000 ms): a server
   * restart can leave an operation waiting on a connection that will never answer, and a method
   * waiting on it would hold its client's method queue forever.
   */
  operationTimeoutMs?: number;
  /**
   * After operations have failed as unavailable this long (default 3000 ms), a new client is
   * tried; if it can reach the database while the store's cannot, it replaces it (see client-holder.ts).
   */
  wedgedAfterMs?: number;
  /** For change source `ipc` (a worker): the primary's change feed, and what it follows the database with. */
  feed?: { link: FeedLink; name: string; kind: ChangeSourceKind };
  /**
   * Cross-server fan-out: writes are published on the bus, live queries follow
   * the bus, and the server holding `relay.lease` relays changes made outside
   * Perseid (followed with `changeSource`).
   */
  fanout?: { bus: FanoutBus; serverId: string; relay?: { lease: Lease; watched: WatchedCollections; intervalMs?: number } };
}

export class MongoStore implements StorageDriver {
  readonly kind = 'mongo';
  readonly changes: ChangeHub;
  private readonly collections = new Map<string, MongoCollection>();
  private feeder: DatabaseFeeder | IpcFeeder | undefined;
  private fanout: FanoutFeeder | undefined;
  private relay: Relay | undefined;
  private tracksIds = true;
  private appliesInserts = false;

  private constructor(
    /** The store's client, replaced when it is wedged (see client-holder.ts). */
    readonly clients: ClientHolder,
    readonly oplogClients: ClientHolder | undefined,
    private readonly options: MongoStoreOptions,
    readonly log: Logger,
  ) {
    this.changes = new ChangeHub('none', { maxWaitMs: options.fenceTimeoutMs ?? 1000, log: this.log });
  }

  static async open(options: MongoStoreOptions): Promise<MongoStore> {
    const log = createLogger('mongo');
    const serverSelectionTimeoutMS = options.serverSelectionTimeoutMs ?? 10000;
    // Command monitoring feeds the APM's per-command figures.
    const connected = (url: string, timeoutMs: number) => connectMongo(url, timeoutMs, apm.enabled);
    const holder = async (role: string, url: string) =>
      new ClientHolder(await connected(url, serverSelectionTimeoutMS), {
        role,
        connect: (timeoutMs) => connected(url, timeoutMs),
        log,
        operationTimeoutMs: options.operationTimeoutMs ?? 30000,
        wedgedAfterMs: options.wedgedAfterMs,
      });
    const clients = await holder('database', options.url);
    const oplogClients = options.oplogUrl ? await holder('oplog', options.oplogUrl) : undefined;
    const store = new MongoStore(clients, oplogClients, options, log);
    await store.chooseSource(options.changeSource ?? 'auto');
    store.resyncAfterOutages();
    log.info('connected', { database: store.databaseName, changes: store.changes.name });
    return store;
  }

  get databaseName(): string {
    return this.clients.db.databaseName;
  }

  collection(name: string): MongoCollection {
    let collection = this.collections.get(name);
    if (!collection) {
      collection = new MongoCollection(name, this.clients, {
        hub: this.changes,
        tracksIds: this.tracksIds,
        appliesInserts: this.appliesInserts,
        ownWrite: (c) => this.ownWrite(c),
        publish: this.fanout ? (c, changes) => this.fanout!.published(c, changes) : undefined,
        countRead: (n) => dataMetrics.databaseReads.inc(n),
        translate: (error) => this.translate(error),
      });
      this.collections.set(name, collection);
    }
    return collection;
  }

  async close(): Promise<void> {
    await this.relay?.close();
    this.fanout?.close();
    this.feeder?.close();
    this.changes.close();
    await this.clients.close();
    await this.oplogClients?.close();
  }

  /**
   * A server that was unreachable and is back may have lost or changed anything
   * meanwhile (a restart, a failover); a resumed feed cannot tell. Every live
   * query re-reads and clients converge.
   */
  private resyncAfterOutages(): void {
    this.followOutages(this.clients.client);
    this.clients.onReplaced((client) => {
      this.followOutages(client);
      this.changes.resync('database client replaced');
    });
  }

  private followOutages(client: MongoClient): void {
    // A quick restart can pass between two heartbeats; its trace is connections
    // failing. Once they stop failing for a moment, re-read.
    let settle: NodeJS.Timeout | undefined;
    client.on('connectionClosed', (event) => {
      if (event.reason !== 'error') return;
      clearTimeout(settle);
      settle = setTimeout(() => this.changes.resync('database connections failed'), 500);
      settle.unref();
    });
    client.on('serverDescriptionChanged', (event) => {
      // A client being replaced goes quiet; only the current one speaks for the database.
      if (client !== this.clients.client) return;
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

  /** Tells the change feed that `collection` was just written to (by this process or a worker it serves). */
  poke(collection: string): void {
    this.ownWrite(collection);
  }

  private ownWrite(collection: string): void {
    this.feeder?.poke(collection);
  }

  private translate(error: unknown): Error {
    if (error instanceof DatabaseUnavailableError) return error;
    if (isUnavailable(error)) return new DatabaseUnavailableError((error as Error).message, error);
    return error instanceof Error ? error : new Error(String(error));
  }

  private async chooseSource(choice: ChangeSourceChoice): Promise<void> {
    const why = (source: string, kind: ChangeSourceKind, reason: string) => {
      this.changes.name = source;
      this.changes.kind = kind;
      this.log.info(`live queries follow ${source}`, { why: reason });
    };
    if (choice === 'ipc') {
      if (!this.options.feed) throw new Error('The ipc change source needs the primary\'s feed');
      this.feeder = new IpcFeeder(this.changes, this.options.feed.link);
      why(`the primary's ${this.options.feed.name}`, this.options.feed.kind, 'a worker receives the changes its primary follows for the whole machine');
      return;
    }
    if (this.options.fanout) {
      const { bus, serverId, relay } = this.options.fanout;
      this.fanout = new FanoutFeeder(this.changes, bus, this.databaseName, serverId, this.log);
      if (relay) {
        this.relay = new Relay({
          clients: this.clients,
          oplogClients: this.oplogClients,
          choice,
          pollIntervalMs: this.options.pollIntervalMs ?? 10000,
          fanout: this.fanout,
          ...relay,
          ownCollections: () => [...this.changes.watched()],
          log: this.log,
        });
        this.relay.start();
      }
      why('the fan-out bus', 'fanout', relay ? 'writes of every server arrive on it, and one server relays changes made outside Perseid' : 'writes of every server arrive on it');
      return;
    }
    const opened = await openDatabaseFeeder(this.changes, this.clients, this.oplogClients, choice, this.options.pollIntervalMs ?? 10000, this.log);
    this.feeder = opened.feeder;
    this.tracksIds = opened.tracksIds;
    // Change streams report each change once, in the database's order (see ChangeHub.insertedHere);
    // the oplog tailer may find an entry late (FerretDB), and a poller reports no changes.
    this.appliesInserts = opened.kind === 'change-stream';
    why(opened.name, opened.kind, opened.reason);
  }
}

export function openMongoStore(options: MongoStoreOptions): Promise<MongoStore> {
  return MongoStore.open(options);
}
