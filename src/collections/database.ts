/**
 * A database: a storage driver plus the live queries kept over it. The process
 * has a default one (what `new Collection(name)` uses), opened from the
 * environment: `MONGO_URL` for MongoDB, otherwise the embedded store in
 * `PERSEID_DATA_DIR` (default `.perseid/data`).
 */
import { fileURLToPath } from 'node:url';
import { metrics } from '../metrics/registry.js';
import { instrumentDriver } from './collections-metrics.js';
import { LiveQueryRegistry, type RegistryOptions } from '../reactive/registry.js';
import type { ChangeSourceKind } from '../data/change-source.js';
import type { StorageDriver } from '../data/driver.js';
import { openEmbeddedStore } from '../data/embedded/store.js';
import type { FeedLink } from '../data/mongo/ipc-feeder.js';
import type { ChangeSourceChoice, MongoStoreOptions } from '../data/mongo/store.js';

export class Database {
  readonly liveQueries: LiveQueryRegistry;
  /** The storage driver, its calls recorded by the APM (collections-metrics.ts). */
  readonly driver: StorageDriver;

  private static opened = 0;
  private readonly section: string;

  constructor(driver: StorageDriver, options: RegistryOptions = {}) {
    this.driver = instrumentDriver(driver);
    this.liveQueries = new LiveQueryRegistry(this.driver, options);
    this.section = Database.opened++ === 0 ? 'liveQueries' : `liveQueries${Database.opened}`;
    metrics.section(this.section, () => this.liveQueries.describe());
  }

  async close(): Promise<void> {
    metrics.removeSection(this.section);
    this.liveQueries.stopAll();
    await this.driver.close();
  }
}

export interface DatabaseOptions extends RegistryOptions {
  /** Directory of the embedded store (default `PERSEID_DATA_DIR` or `.perseid/data`). */
  dataDir?: string;
  /** Acknowledge embedded writes only after fdatasync (survives power loss, not just a crash). */
  fsync?: boolean;
  /** MongoDB connection string; selects the MongoDB driver (default MONGO_URL). */
  mongoUrl?: string;
  /** The oplog's URL, for oplog tailing (default MONGO_OPLOG_URL). */
  oplogUrl?: string;
  /** How live queries learn of MongoDB changes (default PERSEID_CHANGE_SOURCE or auto). */
  changeSource?: ChangeSourceChoice;
  /** Re-read interval of polled queries (default PERSEID_POLL_INTERVAL_MS or 10000). */
  pollIntervalMs?: number;
  /** How long a MongoDB operation waits for a reachable server before failing with 503 (default 10000). */
  serverSelectionTimeoutMs?: number;
  /** How long a MongoDB operation may go unanswered before failing with 503 (default PERSEID_MONGO_TIMEOUT_MS or 30000). */
  operationTimeoutMs?: number;
  /** A worker's link to its primary's change feed (change source `ipc`). */
  feed?: { link: FeedLink; name: string; kind: ChangeSourceKind };
  /** Cross-server fan-out (see MongoStoreOptions.fanout). */
  fanout?: MongoStoreOptions['fanout'];
}

const CHANGE_SOURCES: ChangeSourceChoice[] = ['auto', 'change-stream', 'oplog', 'poll', 'ipc'];

export async function openDatabase(options: DatabaseOptions = {}): Promise<Database> {
  // Routing off exists to measure what it saves (bench/many-queries.ts) and to rule it out when a query misses a change.
  if (options.routeChanges === undefined && process.env.PERSEID_ROUTE_CHANGES === 'off') options = { ...options, routeChanges: false };
  const mongoUrl = options.mongoUrl ?? process.env.MONGO_URL;
  if (mongoUrl) {
    const changeSource = options.changeSource ?? (process.env.PERSEID_CHANGE_SOURCE as ChangeSourceChoice | undefined) ?? 'auto';
    if (!CHANGE_SOURCES.includes(changeSource)) throw new Error(`PERSEID_CHANGE_SOURCE must be one of ${CHANGE_SOURCES.join(', ')}`);
    // Loaded here, not at the top: an app on the embedded store never pays for MongoDB's driver.
    const { openMongoStore } = await import('../data/mongo/store.js');
    const store = await openMongoStore({
      url: mongoUrl,
      oplogUrl: options.oplogUrl ?? process.env.MONGO_OPLOG_URL,
      changeSource,
      pollIntervalMs: options.pollIntervalMs ?? (Number(process.env.PERSEID_POLL_INTERVAL_MS) || undefined),
      serverSelectionTimeoutMs: options.serverSelectionTimeoutMs,
      operationTimeoutMs: options.operationTimeoutMs ?? (Number(process.env.PERSEID_MONGO_TIMEOUT_MS) || undefined),
      feed: options.feed,
      fanout: options.fanout,
    });
    return new Database(store, options);
  }
  const dir = options.dataDir ?? process.env.PERSEID_DATA_DIR ?? '.perseid/data';
  const fsync = options.fsync ?? process.env.PERSEID_FSYNC === '1';
  const store = await openEmbeddedStore({ dir, fsync });
  return new Database(store, options);
}

/**
 * Two copies of this module in one process (a global `perseid` command running
 * an app that imports its own, a path mapping to the sources) would each keep
 * a default database, metrics and live queries of their own: the app's writes
 * would land where the server does not look. Refuse the second copy at once.
 */
const LOADED_FROM = Symbol.for('perseid.collections.database');
const registry = globalThis as { [LOADED_FROM]?: string };
registry[LOADED_FROM] ??= import.meta.url;
if (registry[LOADED_FROM] !== import.meta.url) {
  throw new Error(
    `perseid is loaded twice, from ${fileURLToPath(registry[LOADED_FROM])} and ${fileURLToPath(import.meta.url)}: ` +
      'run the app with the perseid it imports (npx perseid in its directory), and map no `perseid` import to another copy',
  );
}

let defaultDatabase: Promise<Database> | undefined;
let defaultOptions: DatabaseOptions = {};

/**
 * How the default database opens on first use (`perseid start` sets its flags
 * here before it loads the app, so an app that writes while loading writes there).
 */
export function setDefaultDatabaseOptions(options: DatabaseOptions): void {
  defaultOptions = options;
}

/** Makes `database` the one collections without an explicit database use. */
export function setDefaultDatabase(database: Database | Promise<Database>): void {
  defaultDatabase = Promise.resolve(database);
}

/** The default database, opened from the environment on first use. */
export function getDefaultDatabase(): Promise<Database> {
  return (defaultDatabase ??= openDatabase(defaultOptions));
}

/** Forgets the default database (after closing it), so the next use opens a fresh one. */
export function clearDefaultDatabase(): void {
  defaultDatabase = undefined;
}
