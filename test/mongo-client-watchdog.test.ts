/**
 * The MongoDB store replaces a client that can no longer reach a database a new
 * client can (client-holder.ts): the driver sometimes never rediscovers a
 * restarted FerretDB. That wedge is not reproducible on demand, so these tests
 * make the store's client unusable the same way from the outside (its topology
 * closed: every operation fails, as in the wedge, while the server is fine) and
 * check that writes resume, the change source restarts on the new client with
 * nothing lost or doubled, one line says why, the metric counts it, and the old
 * client is closed. The chaos suite covers the real restart.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MongoClient } from 'mongodb';
import { serviceUrl } from '../scripts/services/control.js';
import { Collection } from '../src/collections/collection.js';
import { Database } from '../src/collections/database.js';
import { dataMetrics } from '../src/data/data-metrics.js';
import { DatabaseUnavailableError } from '../src/data/driver.js';
import { openMongoStore, type ChangeSourceChoice } from '../src/data/mongo/store.js';
import { setLogSink } from '../src/log.js';
import { freshDatabase } from './databases.js';
import { eventually } from './processes.js';
import { needsServices } from './skips.js';

const [mongo, ferretdb] = await Promise.all([serviceUrl('mongo-java-server'), serviceUrl('ferretdb')]);

/** What the driver's wedge amounts to: the client's view of the server is gone for good, the server itself is fine. */
function wedge(client: MongoClient): void {
  (client as unknown as { topology: { close(): void } }).topology.close();
}

const cases: Array<{ server: 'mongo-java-server' | 'ferretdb'; url: string | undefined; source: ChangeSourceChoice }> = [
  { server: 'mongo-java-server', url: mongo, source: 'change-stream' },
  { server: 'ferretdb', url: ferretdb, source: 'oplog' },
  { server: 'ferretdb', url: ferretdb, source: 'poll' },
];

describe('a MongoDB client that can no longer reach the database is replaced', () => {
  for (const { server, url, source } of cases) {
    it(`${server} (${source}): writes resume on a new client, live queries miss and double nothing, the old client is closed`, { skip: needsServices({ [server]: url }) }, async () => {
      const database = freshDatabase(url!);
      const lines: string[] = [];
      setLogSink((line) => lines.push(line));
      const store = await openMongoStore({
        url: database.url,
        oplogUrl: source === 'oplog' ? new URL('/local', url).toString() : undefined,
        changeSource: source,
        pollIntervalMs: 200,
        operationTimeoutMs: 3000,
        wedgedAfterMs: 500,
      });
      const db = new Database(store);
      const outside = new MongoClient(database.url);
      try {
        const items = new Collection<{ _id: string; n: number }>('items', { database: db });
        const added = new Map<string, number>();
        const removed: string[] = [];
        const handle = await items.find({}).observeChangesAsync({
          added: (id) => added.set(String(id), (added.get(String(id)) ?? 0) + 1),
          removed: (id) => removed.push(String(id)),
        });
        await items.insertAsync({ _id: 'before', n: 1 });
        await eventually(() => added.has('before'), 'the live query to see the first write', 5000);

        const replacedBefore = dataMetrics.clientsReplaced.get();
        const old = store.clients.client;
        wedge(old);
        if (source === 'oplog') wedge(store.oplogClients!.client);
        // At first the store reports the database unavailable, as it would during the wedge ...
        await assert.rejects(items.insertAsync({ _id: 'refused', n: 0 }), (error: unknown) => error instanceof DatabaseUnavailableError || (error as { error?: number }).error === 503);
        // ... and keeps trying writes until a new client takes over.
        let written = 0;
        await eventually(
          async () => {
            try {
              await items.insertAsync({ _id: `after-${written}`, n: 2 });
              written++;
              return true;
            } catch {
              await new Promise((r) => setTimeout(r, 50));
              return false;
            }
          },
          'a write after the client is replaced',
          15000,
        );
        // The oplog has a client of its own, replaced the same way when its reads keep failing.
        if (source === 'oplog') await eventually(() => store.oplogClients!.replacements === 1, 'the oplog client to be replaced', 15000);
        assert.notEqual(store.clients.client, old);
        assert.equal(store.clients.replacements, 1);
        assert.equal(dataMetrics.clientsReplaced.get() - replacedBefore, source === 'oplog' ? 2 : 1);
        assert.equal(lines.filter((l) => /WARN .*replaced the database client/.test(l)).length, 1, lines.join('\n'));
        if (source === 'oplog') assert.equal(lines.filter((l) => /WARN .*replaced the oplog client/.test(l)).length, 1, lines.join('\n'));
        await assert.rejects(old.db().command({ ping: 1 }), 'the old client is closed');

        // The change source follows the new client: a write by this store and one from outside both arrive, once.
        await items.insertAsync({ _id: 'later', n: 3 });
        await outside.db().collection('items').insertOne({ _id: 'outside' as unknown as never, n: 4 });
        const want = ['before', 'after-0', 'later', 'outside'];
        await eventually(() => want.every((id) => added.has(id)), `the live query to see ${want.join(', ')}`, 5000);
        assert.deepEqual([...added].filter(([, count]) => count !== 1), [], 'a document added twice');
        assert.deepEqual(removed, []);
        assert.equal(added.has('refused'), false);
        handle.stop();
      } finally {
        setLogSink((line) => process.stderr.write(line + '\n'));
        await outside.close();
        await db.close();
        await database.drop();
      }
    });
  }
});
