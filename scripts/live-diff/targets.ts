/**
 * Where the differential run points: a Perseid server (or two sharing Redis
 * fan-out) on loopback over one database and change source, the app it runs
 * (one publication taking any query, one write method, one no-op method), a
 * fresh query of the database that does not go through live queries, and,
 * where the database speaks MongoDB's wire protocol, a plain client writing
 * behind Perseid's back.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Long, MongoClient, type Db } from 'mongodb';
import { serviceUrl } from '../services/control.js';
import { Collection } from '../../src/collections/collection.js';
import { openDatabase, type Database, type DatabaseOptions } from '../../src/collections/database.js';
import { Random } from '../../src/ddp/random.js';
import type { ChangeHub } from '../../src/data/mongo/change-hub.js';
import type { RedisBus } from '../../src/fanout/bus-redis.js';
import { createServer, type PerseidServer } from '../../src/server/app.js';
import type { Doc, Shape, WriteOp } from './model.js';

export const TARGETS = ['embedded', 'mongo-java-server', 'mongo-java-server-poll', 'mongo-java-server-oplog', 'ferretdb-oplog', 'fanout'] as const;
export type TargetName = (typeof TARGETS)[number];

export interface OpenTarget {
  /** Where writes go through Perseid, and where clients subscribe (another server for fan-out). */
  writerUrl: string;
  readerUrl: string;
  /** A fresh query of the database, not through live queries. */
  find(selector: Doc, options: { sort?: Array<[string, 1 | -1]>; fields?: Shape['fields'] }): Promise<Doc[]>;
  /** Applies `op` with a plain MongoDB client, not through Perseid; undefined on the embedded store. */
  direct?: (op: WriteOp) => Promise<void>;
  /** How long after the writes a change can still be on its way. */
  lagMs: number;
  /**
   * Whether writes may run at once. Not on the stand-ins' oplogs: mongo-java-server can log a delete before the insert
   * that delete removed, and FerretDB can log two updates of one document made at once in an order that does not end
   * with the document it stored (a $set and an $inc of n logged as 6 then 15, 13 + 2, while it stored 6). MongoDB logs
   * in commit order; every follower of those oplogs ends on the wrong document.
   */
  concurrentWrites: boolean;
  /** Interrupts the change source, where that can be done: its live queries re-read, and change streams lose their cursors. */
  interrupt(): Promise<void>;
  close(): Promise<void>;
}

/** One write through the collection API, as an app's method would make it; a write the database refuses is skipped. */
export async function applyThroughPerseid(collection: Collection, op: WriteOp): Promise<void> {
  try {
    if (op.kind === 'insert') await collection.insertAsync(op.doc);
    else if (op.kind === 'remove') await collection.removeAsync(op.selector);
    else await collection.updateAsync(op.selector, op.modifier, { multi: op.multi, upsert: op.upsert });
  } catch (error) {
    if (!isRefusal(error)) throw error;
  }
}

/** A duplicate id or `$inc` of a string: the database says no, the run goes on. */
function isRefusal(error: unknown): boolean {
  return /duplicate|E11000|Cannot (apply|increment)|non-numeric|cannot apply|must be an? |not an array|Modifier|already exists|type/i.test(String((error as Error).message));
}

async function applyDirect(db: Db, name: string, op: WriteOp): Promise<void> {
  const raw = db.collection<Doc>(name);
  try {
    if (op.kind === 'insert') await raw.insertOne({ ...op.doc });
    else if (op.kind === 'remove') await raw.deleteMany(op.selector);
    else if (!Object.keys(op.modifier).every((k) => k.startsWith('$'))) await raw.replaceOne(op.selector, op.modifier, { upsert: op.upsert });
    else if (op.multi) await raw.updateMany(op.selector, op.modifier, { upsert: op.upsert });
    else await raw.updateOne(op.selector, op.modifier, { upsert: op.upsert });
  } catch (error) {
    if (!isRefusal(error)) throw error;
  }
}

function app(server: PerseidServer, collection: (name: string) => Collection): void {
  server.publish('diff.view', function (name: unknown, shape: unknown) {
    const s = shape as Shape;
    return collection(String(name)).find(s.selector, { sort: s.sort, skip: s.skip, limit: s.limit, fields: s.fields });
  });
  server.methods({
    async 'diff.write'(name: unknown, ops: unknown, together: unknown) {
      const c = collection(String(name));
      const list = ops as WriteOp[];
      if (together) await Promise.all(list.map((op) => applyThroughPerseid(c, op)));
      else for (const op of list) await applyThroughPerseid(c, op);
      return list.length;
    },
    'diff.sync'() {
      return true;
    },
  });
}

async function startOn(database: Database, port: number): Promise<{ server: PerseidServer; url: string }> {
  const server = createServer();
  const collections = new Map<string, Collection>();
  app(server, (name) => {
    let c = collections.get(name);
    if (!c) collections.set(name, (c = new Collection(name, { database })));
    return c;
  });
  const { port: bound } = await server.listen(port, '127.0.0.1');
  return { server, url: `ws://127.0.0.1:${bound}/websocket` };
}

function hubOf(database: Database): ChangeHub | undefined {
  const changes = database.driver.changes as Partial<ChangeHub>;
  return typeof changes.resync === 'function' ? (changes as ChangeHub) : undefined;
}

async function mongoBase(server: 'mongo-java-server' | 'ferretdb'): Promise<string> {
  const url = await serviceUrl(server);
  if (!url) throw new Error(`${server} is not running: start it with npm run services start`);
  return url;
}

/**
 * Kills the server cursors open on collection `name`, the change streams following it among them. Servers number
 * cursors upwards: a fresh cursor's id, and the few hundred before it.
 */
export async function killCursors(db: Db, name: string): Promise<void> {
  const probe = db.collection(name).find({}, { batchSize: 1 });
  await probe.hasNext();
  const newest = probe.id === undefined ? 0 : Number(probe.id);
  await probe.close();
  const ids = Array.from({ length: 500 }, (_, i) => newest - i).filter((id) => id > 0).map((id) => Long.fromNumber(id));
  if (ids.length > 0) await db.command({ killCursors: name, cursors: ids });
}

function withDb(base: string, db: string): string {
  const u = new URL(base);
  u.pathname = `/${db}`;
  return u.toString();
}

/** Opens `target` for a run on collection `name`; servers listen on `port` and `port + 1` (0: any). */
export async function openTarget(target: TargetName, name: string, port = 0): Promise<OpenTarget> {
  if (target === 'embedded') {
    const dir = mkdtempSync(join(tmpdir(), 'perseid-live-diff-'));
    const database = await openDatabase({ dataDir: dir });
    const { server, url } = await startOn(database, port);
    const collection = new Collection(name, { database });
    return {
      writerUrl: url,
      readerUrl: url,
      lagMs: 500,
      concurrentWrites: true,
      find: async (selector, options) => (await collection.find(selector, options).fetchAsync()) as Doc[],
      interrupt: async () => undefined,
      async close() {
        await server.close();
        await database.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const server = target === 'ferretdb-oplog' ? 'ferretdb' : 'mongo-java-server';
  const base = await mongoBase(server);
  const dbName = `perseid_diff_${Random.id(8).toLowerCase()}`;
  const mongoUrl = withDb(base, dbName);
  const plain = new MongoClient(mongoUrl);
  await plain.connect();
  const db = plain.db(dbName);
  const source = target === 'mongo-java-server-poll' ? 'poll' : target.endsWith('oplog') ? 'oplog' : 'change-stream';
  const options: DatabaseOptions = { mongoUrl, changeSource: source, pollIntervalMs: 200, oplogUrl: source === 'oplog' ? withDb(base, 'local') : undefined };
  const opened: Array<{ server: PerseidServer; url: string; database: Database; bus?: RedisBus }> = [];
  if (target === 'fanout') {
    const redisUrl = await serviceUrl('redis');
    if (!redisUrl) throw new Error('redis is not running: start it with npm run services start');
    const { openFanout } = await import('../../src/cli/scale-out.js');
    const { createLogger } = await import('../../src/log.js');
    for (const id of ['writer', 'reader']) {
      const config = { redisUrl, mongoUrl, relay: true, balancer: false, discovery: 'redis' as const, intervalMs: 2000, fanout: true };
      const { bus, store } = await openFanout(config, `${dbName}-${id}`, createLogger('live-diff'));
      const database = await openDatabase({ ...options, fanout: store });
      opened.push({ ...(await startOn(database, port && port + opened.length)), database, bus });
    }
  } else {
    const database = await openDatabase(options);
    opened.push({ ...(await startOn(database, port)), database });
  }
  return {
    writerUrl: opened[0]!.url,
    readerUrl: opened.at(-1)!.url,
    // FerretDB's oplog reads, and the relay's second hop over Redis, take longer under load (a 2-core machine running
    // the suite beside two other jobs once took over 3 s). Only a divergence waits this long: agreement ends the wait.
    lagMs: target === 'ferretdb-oplog' || target === 'fanout' ? 6000 : source === 'poll' ? 1500 : 1000,
    concurrentWrites: source !== 'oplog',
    find: (selector, options) => db.collection<Doc>(name).find(selector, { sort: options.sort, projection: options.fields }).toArray(),
    direct: (op) => applyDirect(db, name, op),
    async interrupt() {
      for (const { database } of opened) hubOf(database)?.resync('interrupted by the differential run', name);
      if (source === 'change-stream') await killCursors(db, name);
    },
    async close() {
      for (const { server: s, database, bus } of opened) {
        await s.close();
        await database.close();
        await bus?.close();
      }
      await db.dropDatabase().catch(() => undefined);
      await plain.close();
    },
  };
}
