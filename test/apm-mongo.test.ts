/**
 * The index advisor on MongoDB-wire servers, through the real driver: each new
 * query shape is explained once where the server has `explain` (FerretDB
 * reports its backend's plan), and on a server without it (mongo-java-server)
 * the advice is inferred from the collection's indexes and says so. On both,
 * creating the advised index makes the advice disappear, and its cost does
 * not claim a count of documents examined that neither server gives. Drop
 * advice spares TTL indexes and is never in favour of a sparse one.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { MongoClient } from 'mongodb';
import { serviceUrl } from '../scripts/services/control.js';
import { adviceLines } from '../src/cli/apm.js';
import { Collection } from '../src/collections/collection.js';
import { openDatabase, type Database } from '../src/collections/database.js';
import { JOBS_COLLECTION, RunHistory } from '../src/jobs/history.js';
import { apm } from '../src/metrics/apm.js';
import { adviceFor } from '../src/metrics/apm.js';
import { freshDatabase } from './databases.js';
import { eventually } from './processes.js';
import { needsServices } from './skips.js';

const servers = { ferretdb: await serviceUrl('ferretdb'), 'mongo-java-server': await serviceUrl('mongo-java-server') };

for (const [name, url] of Object.entries(servers)) {
  describe(`the index advisor on ${name}`, { skip: needsServices({ [name]: url }) }, () => {
    const target = url ? freshDatabase(url) : undefined;
    let database: Database | undefined;
    after(async () => {
      await database?.close();
      await target?.drop();
    });

    it('advises the ESR index for a scanning shape, and none once it exists', async () => {
      const raw = await new MongoClient(target!.url).connect();
      await raw.db().collection('orders').insertMany(Array.from({ length: 500 }, (_, i) => ({ _id: `o${i}` as never, owner: `u${i % 10}`, at: i })));
      await raw.close();
      database = await openDatabase({ mongoUrl: target!.url, changeSource: 'poll' });
      const orders = new Collection<{ owner: string; at: number }>('orders', { database });
      apm.reset();
      for (let i = 0; i < 3; i++) assert.equal((await orders.find({ owner: `u${i}` }, { sort: { at: -1 }, limit: 5 }).fetchAsync()).length, 5);
      const shapeOf = () => apm.report().database.shapes.find((s) => s.collection === 'orders' && s.shape.key === '{owner: eq} sort {at: -1}');
      assert.equal(shapeOf()?.ops, 3);
      const advise = async () => adviceFor(await apm.snapshot()).filter((a) => a.collection === 'orders');
      if (name === 'ferretdb') {
        await eventually(() => shapeOf()?.plan !== undefined, 'the shape to be explained once');
        assert.equal(shapeOf()!.plan!.sampled, true);
        assert.equal(shapeOf()!.plan!.stage, 'COLLSCAN');
      } else {
        // No explain: give the attempt time to fail, then the advice is inferred from the indexes.
        await eventually(() => apm.report().database.commands.some((c) => c.name === 'explain' && c.failures > 0), 'the explain attempt to fail');
        assert.equal(shapeOf()!.plan, undefined);
      }
      const [advice] = await advise();
      assert.ok(advice, 'advice for orders');
      assert.deepEqual(advice.index, { owner: 1, at: -1 });
      assert.equal(advice.line, "await new Collection('orders').createIndexAsync({ owner: 1, at: -1 });");
      assert.equal(advice.cost!.inferred, name !== 'ferretdb');
      // Neither server counts the documents a query examined: the cost says so rather than 0 a second.
      assert.equal(advice.cost!.docsExaminedPerSecond, null);
      assert.doesNotMatch(adviceLines([advice]).join('\n'), /\d docs examined\/s/);
      await orders.createIndexAsync({ owner: 1, at: -1 });
      assert.deepEqual(await advise(), []);
    });

    it('advises no index for the reads of the jobs\' runs the dashboard makes: the engine\'s own index serves them', { skip: name !== 'ferretdb' && 'only FerretDB explains' }, async () => {
      database ??= await openDatabase({ mongoUrl: target!.url, changeSource: 'poll' });
      const history = new RunHistory(database);
      await history.ensureIndexes();
      for (let i = 0; i < 5; i++) await history.addScheduled('export', new Date(Date.UTC(2026, 0, 1, 0, i)), 0, 'cron "* * * * *", timeoutMs 600000, retries 1, retryDelayMs 1000, overlap false');
      apm.reset();
      // What the dashboard and perseid top read every refresh: each job's latest runs, newest first.
      assert.equal((await history.latestOfEach(['export'], 100)).length, 5);
      const shape = () => apm.report().database.shapes.find((s) => s.collection === JOBS_COLLECTION && s.shape.key === '{job: eq} sort {createdAt: -1}');
      await eventually(() => shape()?.plan !== undefined, 'the shape to be explained once');
      assert.deepEqual((await adviceFor(await apm.snapshot())).filter((a) => a.collection === JOBS_COLLECTION).map((a) => a.line), []);
    });

    it('advises dropping an index a longer one covers, but not a TTL index, nor in favour of a sparse one', async () => {
      const raw = await new MongoClient(target!.url).connect();
      const logins = raw.db().collection('logins');
      await logins.insertMany(Array.from({ length: 20 }, (_, i) => ({ at: new Date(), user: `u${i}`, device: `d${i % 3}` })));
      // FerretDB has no TTL indexes ("not implemented yet") and makes a sparse index a full one: there, at_1
      // and device_1 are ordinary indexes a longer one covers, and are advised for dropping.
      await logins.createIndex({ at: 1 }, { expireAfterSeconds: 3600 }).catch(() => logins.createIndex({ at: 1 }));
      await logins.createIndex({ at: 1, user: 1 });
      await logins.createIndex({ device: 1 });
      await logins.createIndex({ device: 1, at: 1 }, { sparse: true });
      await logins.createIndex({ user: 1 });
      await logins.createIndex({ user: 1, device: 1 });
      const listed = await logins.indexes();
      const ttl = listed.some((i) => i.name === 'at_1' && i.expireAfterSeconds !== undefined);
      const sparse = listed.some((i) => i.name === 'device_1_at_1' && i.sparse === true);
      await raw.close();
      database ??= await openDatabase({ mongoUrl: target!.url, changeSource: 'poll' });
      // A query on the collection, so the snapshot lists its indexes.
      await new Collection<{ user: string }>('logins', { database }).find({ user: 'u1' }).fetchAsync();
      const drops = adviceFor(await apm.snapshot()).filter((a) => a.collection === 'logins' && a.action === 'drop');
      // Dropping at_1 would stop the expiry; device_1_at_1 holds only the documents that have those fields.
      const expected = ['user_1', ...(ttl ? [] : ['at_1']), ...(sparse ? [] : ['device_1'])];
      assert.deepEqual(drops.map((a) => a.name).sort(), expected.sort());
    });
  });
}
