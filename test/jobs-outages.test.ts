/**
 * The jobs engine while what it depends on is cut off by a TCP relay (a
 * network outage: the service keeps its data) and comes back. Redis, holding
 * the leases: nothing is claimed while they cannot be confirmed, no run is
 * left `running` under a live runner, the runner keeps its name (nobody else
 * took its lease, even when it lapsed), and the log says so in a line or two
 * rather than one per renewal. The database, while a run finishes: its end is
 * written once the database answers again.
 */
import assert from 'node:assert/strict';
import { createServer, connect, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { serviceUrl } from '../scripts/services/control.js';
import { RedisLease } from '../src/coordination/lease-redis.js';
import { Random } from '../src/ddp/random.js';
import { RunHistory } from '../src/jobs/history.js';
import { Jobs } from '../src/jobs/jobs.js';
import { createLogger, setLogSink } from '../src/log.js';
import { redisClient } from '../src/redis-client.js';
import { openDatabase } from '../src/collections/database.js';
import { MemoryLeases } from '../src/coordination/lease-memory.js';
import { embeddedTarget, freshDatabase } from './databases.js';
import { eventually } from './processes.js';
import { needsServices } from './skips.js';

const redisUrl = await serviceUrl('redis');

/** A TCP relay to `port` that can be cut off: its connections are dropped and new ones refused until it is restored. */
async function cuttableRelay(port: number): Promise<{ port: number; cut(): Promise<void>; restore(): Promise<void>; close(): Promise<void> }> {
  const open = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(port, '127.0.0.1');
    for (const [a, b] of [[client, upstream], [upstream, client]] as const) {
      open.add(a);
      a.pipe(b);
      a.on('error', () => b.destroy());
      a.on('close', () => {
        open.delete(a);
        b.destroy();
      });
    }
  });
  const listen = (at: number) => new Promise<void>((resolve) => server.listen(at, '127.0.0.1', resolve));
  const cut = () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of open) socket.destroy();
    return closed;
  };
  await listen(0);
  const own = (server.address() as AddressInfo).port;
  return { port: own, cut, restore: () => (server.listening ? Promise.resolve() : listen(own)), close: () => (server.listening ? cut() : Promise.resolve()) };
}

const lines: string[] = [];
/** Keeps the log lines of a suite's tests in `lines`. */
function captureLog(): void {
  before(() => setLogSink((line) => lines.push(line)));
  after(() => setLogSink((line) => process.stderr.write(line + '\n')));
}

describe('jobs while their Redis leases are cut off', { skip: needsServices({ redis: redisUrl }) }, () => {
  captureLog();
  it('leaves no run stuck running, claims nothing it cannot lock, and logs an outage in a line or two', async () => {
    const relay = await cuttableRelay(Number(new URL(redisUrl!).port));
    const opened = await embeddedTarget().open();
    // As `perseid start` makes the leases' client.
    const redis = redisClient(`redis://127.0.0.1:${relay.port}`, { maxRetriesPerRequest: 2 }, createLogger('leases'));
    const prefix = `perseid-test:${Random.id(6)}:`;
    const jobs = new Jobs(opened.database).schedule('tick', 200, () => sleep(50));
    const history = new RunHistory(opened.database);
    const ttlMs = 3000;
    /** Cuts Redis off for `ms`; resolves with the warnings of the jobs engine meanwhile, once every run due before it came back has ended. */
    const outage = async (ms: number) => {
      await relay.cut();
      const cutAt = Date.now();
      await sleep(ms);
      const warned = lines.filter((l) => / WARN {2}\[jobs\]/.test(l) && Date.parse(l.slice(0, 24)) >= cutAt);
      await relay.restore();
      const restoredAt = Date.now();
      const left = async () => (await history.runs.find({ scheduledAt: { $lt: new Date(restoredAt) }, status: { $in: ['queued', 'running'] } }).fetchAsync()).map((r) => `${r._id} ${r.status}`);
      await eventually(async () => (await left()).length === 0, 'every run due during the outage to end', 8000).catch(async (error: Error) => {
        throw new Error(`${error.message}; left: ${(await left()).join(', ')}`);
      });
      // Claims stop once the lease has gone unconfirmed for half its time to live.
      const started = await history.runs.find({ 'attemptLog.startedAt': { $gte: new Date(cutAt + ttlMs / 2 + 100), $lt: new Date(restoredAt) } }).fetchAsync();
      assert.deepEqual(started.map((r) => r._id), [], 'runs started while the lease could not be renewed');
      return warned;
    };
    try {
      await jobs.start({ database: opened.database, leases: (o) => new RedisLease(redis, o, prefix), holder: 'a', leaseTtlMs: ttlMs, pollMs: 50 });
      await eventually(async () => (await history.runs.find({ status: 'succeeded' }).countAsync()) > 0, 'a first run');

      // Shorter than the lease: it is still ours when Redis returns.
      const short = await outage(1200);
      assert.equal(jobs.runner, 'a', 'the runner took itself for taken over after a short outage');
      assert.ok(short.length <= 2, `a short outage took ${short.length} warnings:\n${short.join('\n')}`);

      // Longer than the lease: it lapsed meanwhile, but nobody else took it (its next token says so), so the runner goes on.
      await outage(ttlMs + 500);
      assert.equal(jobs.runner, 'a', 'the runner took itself for taken over');
      assert.deepEqual(lines.filter((l) => /the runner lease was taken over/.test(l)), []);

      // Stopping while Redis is down: the lease not given up expires by itself; nothing waits for Redis to come back.
      await relay.cut();
      await sleep(2000);
      const stopping = Date.now();
      await jobs.stop();
      const tookMs = Date.now() - stopping;
      assert.ok(tookMs < 5000, `stopping took ${tookMs} ms`);
    } finally {
      await jobs.stop();
      redis.disconnect();
      await relay.close();
      await opened.cleanup();
    }
  });
});

const mongo = await serviceUrl('mongo-java-server');

describe('jobs while their database is cut off', { skip: needsServices({ 'mongo-java-server': mongo }) }, () => {
  captureLog();
  it('records the end of a run that finished during the outage once the database answers', async () => {
    const relay = await cuttableRelay(Number(new URL(mongo!).port));
    // Dropped directly, not through the relay.
    const { url, drop } = freshDatabase(mongo!);
    const through = new URL(url);
    through.port = String(relay.port);
    const database = await openDatabase({ mongoUrl: through.href, changeSource: 'poll', operationTimeoutMs: 1000 });
    let finish!: () => void;
    const finishing = new Promise<void>((resolve) => (finish = resolve));
    const jobs = new Jobs(database).define('report', async () => {
      await finishing;
      return 'done';
    });
    const table = new MemoryLeases();
    try {
      await jobs.start({ database, leases: (o) => table.lease(o), holder: 'a', leaseTtlMs: 3000, pollMs: 50 });
      const id = await jobs.enqueue('report');
      const run = () => jobs.run(id);
      await eventually(async () => (await run())?.status === 'running', 'the run to start');
      await relay.cut();
      finish();
      await sleep(2000);
      await relay.restore();
      await eventually(async () => (await run().catch(() => undefined))?.status === 'succeeded', 'the run to be recorded as succeeded', 15000).catch(async (error: Error) => {
        throw new Error(`${error.message}; it is ${JSON.stringify(await run())}`);
      });
      const done = (await run())!;
      assert.deepEqual([done.attempts, done.result, done.attemptLog.map((a) => a.outcome)], [1, 'done', ['succeeded']]);
      assert.ok(lines.some((l) => /could not record the end of a run; trying again/.test(l)), 'the outage was not logged');
      assert.ok(!lines.some((l) => /result refused/.test(l)), 'a write that landed before the outage was taken for a takeover');
    } finally {
      await jobs.stop();
      await database.close();
      await relay.close();
      await drop();
    }
  });
});
