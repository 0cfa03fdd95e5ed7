/**
 * Many servers as real processes on loopback, with a real Redis and
 * mongo-java-server: registration and expiry, balancing by load, SockJS
 * pinning through /sockjs/info, fan-out only to the servers that need a
 * change, a Redis restart mid-run, and a drain that costs clients nothing
 * but a reconnect.
 */
import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { resolve } from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { MongoClient } from 'mongodb';
import SimpleDDP from 'simpleddp';
import WebSocket from 'ws';
import { serviceUrl, startService, type RunningService } from '../scripts/services/control.js';
import { freePort } from '../scripts/services/process.js';
import { freshDatabase } from './databases.js';
import { eventually, exited, SockjsPeer, startPerseid, type PerseidProcess } from './processes.js';
import { needsServices } from './skips.js';

const APP = 'dist/test/fixtures/cluster-app.js';
const SKEW = pathToFileURL(resolve('dist/test/fixtures/skewed-clock.js')).href;
const mongo = await serviceUrl('mongo-java-server');
const redis = await serviceUrl('redis');
const skip = needsServices({ 'mongo-java-server': mongo, redis });

interface Who {
  pid: number;
}
interface Item {
  id: string;
  n: number;
}
interface Stats {
  perseid_fanout_received_total?: number;
  perseid_fanout_resyncs_received_total?: number;
  cluster?: { id: string; servers: Array<{ id: string; url: string; sessions: number; cpuPercent: number; lagMs: number }> };
}

/** A raw WebSocket that says a balancer already chose this server (so a balancer serves it itself). */
class PassedOnWebSocket extends WebSocket {
  constructor(url: string) {
    super(url, { headers: { 'x-perseid-balanced': '1' } });
  }
}

/** A raw WebSocket from another loopback address than the servers' own, told apart from a balancer passing it on. */
class FromOtherAddress extends WebSocket {
  static readonly address = '127.0.0.9';
  constructor(url: string) {
    super(url, { localAddress: FromOtherAddress.address });
  }
}

/** A raw WebSocket that forges a balancer's mark (as long as a pass key, in characters past ASCII) and a client address of its choosing. */
class ForgedPassOn extends WebSocket {
  constructor(url: string) {
    super(url, { headers: { 'x-perseid-balanced': '\u00e9'.repeat(24), 'x-forwarded-for': '203.0.113.9' } });
  }
}

function ddp(url: string, passedOn = false): SimpleDDP {
  return new SimpleDDP({
    endpoint: `${url.replace(/^http/, 'ws')}/websocket`,
    SocketConstructor: passedOn ? PassedOnWebSocket : WebSocket,
    reconnectInterval: 100,
    maxTimeout: 4000,
  });
}

async function stats(server: PerseidProcess): Promise<Stats> {
  return (await (await fetch(`${server.url}/perseid/stats`)).json()) as Stats;
}

/**
 * Waits until `server` sees `n` servers, none busy: one still starting up, or
 * lagging on a loaded machine, rightly gets fewer clients (see loadScore).
 */
async function settled(server: PerseidProcess, n: number): Promise<void> {
  await eventually(async () => {
    const servers = (await stats(server)).cluster?.servers ?? [];
    return servers.length === n && servers.every((s) => s.cpuPercent < 50 && s.lagMs < 20);
  }, `${n} idle servers registered`, 20000);
}

/** A server of the cluster on a port chosen first (its public URL names it). */
async function member(env: NodeJS.ProcessEnv, extra: string[] = []): Promise<PerseidProcess> {
  const port = await freePort();
  return startPerseid(APP, ['--port', String(port), '--public-url', `http://127.0.0.1:${port}`, '--discovery-interval-ms', '200', ...extra], env);
}

/** Opens clients and keeps them for closing after the test. */
class Clients {
  readonly all: SimpleDDP[] = [];
  async open(url: string, n: number, passedOn = false): Promise<SimpleDDP[]> {
    const opened = await Promise.all(
      Array.from({ length: n }, async () => {
        const client = ddp(url, passedOn);
        await client.connect();
        return client;
      }),
    );
    this.all.push(...opened);
    return opened;
  }
  async closeAll(): Promise<void> {
    await Promise.all(this.all.splice(0).map((c) => c.disconnect().catch(() => undefined)));
  }
}

async function pids(clients: SimpleDDP[]): Promise<number[]> {
  return Promise.all(clients.map(async (c) => (await c.call<Who>('whoami')).pid));
}

function count(values: number[], value: number | undefined): number {
  return values.filter((v) => v === value).length;
}

describe('a cluster of servers', { skip }, () => {
  describe('discovery and balancing (registry in Redis)', () => {
    let database: ReturnType<typeof freshDatabase>;
    let balancer: PerseidProcess;
    let other: PerseidProcess;
    const clients = new Clients();

    before(async () => {
      database = freshDatabase(mongo!);
      const env = { MONGO_URL: database.url, REDIS_URL: redis! };
      [balancer, other] = await Promise.all([member(env, ['--balancer']), member(env)]);
      for (const server of [balancer, other]) await eventually(async () => (await stats(server)).cluster?.servers.length === 2, 'both servers to see both', 5000);
    });
    // A failed check must not leave its clients loading a server the next test expects idle.
    afterEach(() => clients.closeAll());
    after(async () => {
      await Promise.all([balancer?.stop(), other?.stop()]);
      await database?.drop();
    });

    it('registers each server with its URL and load', async () => {
      for (const server of [balancer, other]) {
        const { cluster } = await stats(server);
        assert.deepEqual(cluster!.servers.map((s) => s.url).sort(), [balancer.url, other.url].sort());
        // A server's pass key stays in the registry: a reader of the stats could pass off addresses of their choosing with it.
        assert.ok(cluster!.servers.every((s) => !('passKey' in s)), 'no pass key in the stats');
      }
    });

    it('spreads new connections, then favours the less loaded server', async () => {
      await settled(balancer, 2);
      // The first few stay (passing a connection on costs a relay for its life), then they alternate.
      const spread = await pids(await clients.open(balancer.url, 30));
      assert.ok(count(spread, other.child.pid) >= 6 && count(spread, balancer.child.pid) >= 6, `30 connections split ${count(spread, balancer.child.pid)}/${count(spread, other.child.pid)}`);
      // Load the other server directly; once announced, new clients stay on the balancer.
      await clients.open(other.url, 16);
      const otherLoad = count(spread, other.child.pid) + 16;
      await eventually(async () => (await stats(balancer)).cluster!.servers.find((s) => s.url === other.url)!.sessions >= otherLoad, 'the other server to announce its load');
      await settled(balancer, 2);
      const next = await pids(await clients.open(balancer.url, 10));
      assert.ok(count(next, balancer.child.pid) >= 8, `only ${count(next, balancer.child.pid)} of 10 stayed on the less loaded balancer`);
      await clients.closeAll();
    });

    // Bounded: a server that a forged mark crashed leaves the forger's client reconnecting for ever.
    it('counts a client the balancer passes on by its own address there, without a warning to set HTTP_FORWARDED_COUNT', { timeout: 30_000 }, async () => {
      await clients.open(balancer.url, 12, true);
      const announced = async (url: string) => (await stats(balancer)).cluster!.servers.find((s) => s.url === url)!.sessions;
      await eventually(async () => (await announced(balancer.url)) >= 12 && (await announced(other.url)) === 0, 'the balancer to count its own load and the other server none');
      await settled(balancer, 2);
      const passed = new SimpleDDP({ endpoint: `${balancer.url.replace(/^http/, 'ws')}/websocket`, SocketConstructor: FromOtherAddress, maxTimeout: 4000 });
      clients.all.push(passed);
      await passed.connect();
      const who = await passed.call<Who & { address: string }>('whoami');
      assert.equal(who.pid, other.child.pid, 'the balancer passed the client on');
      // Not the balancer's address, which every client it passes on would share for the per-address limits.
      assert.equal(who.address, FromOtherAddress.address);
      assert.doesNotMatch(other.log(), /HTTP_FORWARDED_COUNT is not set/);
      // The balancer's mark is not the client's to forge: a made-up X-Forwarded-For is not taken on trust.
      const forger = new SimpleDDP({ endpoint: `${other.url.replace(/^http/, 'ws')}/websocket`, SocketConstructor: ForgedPassOn, maxTimeout: 4000 });
      clients.all.push(forger);
      await forger.connect();
      assert.equal((await forger.call<{ address: string }>('whoami')).address, '127.0.0.1');
      await clients.closeAll();
    });

    it('pins a SockJS client (sockjs-client from npm) to the least loaded server through /sockjs/info', async () => {
      await clients.open(balancer.url, 10, true);
      const announced = async (url: string) => (await stats(balancer)).cluster!.servers.find((s) => s.url === url)!.sessions;
      await eventually(async () => (await announced(balancer.url)) >= 10 && (await announced(other.url)) === 0, 'the balancer to count its own load and the other server none');
      const info = (await (await fetch(`${balancer.url}/sockjs/info`)).json()) as { base_url?: string; websocket: boolean };
      assert.equal(info.base_url, `${other.url}/sockjs`);
      for (const transport of ['websocket', 'xhr-streaming', 'xhr-polling']) {
        const peer = await SockjsPeer.open(`${balancer.url}/sockjs`, transport);
        try {
          assert.ok(peer.transportUrl.startsWith(`${other.url}/sockjs`), `${transport} talks to ${peer.transportUrl}`);
          assert.equal(((await peer.call('1', 'whoami')) as Who).pid, other.child.pid);
        } finally {
          peer.close();
        }
      }
      await clients.closeAll();
    });

    it('serves a client here when the server it was passed on to does not answer (stopped)', { timeout: 30_000 }, async () => {
      await clients.open(balancer.url, 20, true);
      const announced = async (url: string) => (await stats(balancer)).cluster!.servers.find((s) => s.url === url)!.sessions;
      // The SockJS sessions of the test before may linger on the other server a while: a clear lead is enough.
      await eventually(async () => (await announced(balancer.url)) >= 20 && (await announced(other.url)) <= 4, 'the balancer to count its own load, well above the other server\'s');
      await settled(balancer, 2);
      // Stopped, the other server still accepts connections (its kernel does) and, for its time to live, stays in the registry.
      other.child.kill('SIGSTOP');
      try {
        const started = Date.now();
        const who = await new Promise<Who>((resolve, reject) => {
          const ws = new WebSocket(`${balancer.url.replace(/^http/, 'ws')}/websocket`);
          const timer = setTimeout(() => {
            ws.terminate();
            reject(new Error('no answer within 15 s: the client waits on the stopped server'));
          }, 15000);
          ws.on('open', () => ws.send(JSON.stringify({ msg: 'connect', version: '1', support: ['1'] })));
          ws.on('message', (data) => {
            const m = JSON.parse(String(data)) as { msg: string; result?: Who };
            if (m.msg === 'connected') ws.send(JSON.stringify({ msg: 'method', id: 'w', method: 'whoami', params: [] }));
            if (m.msg !== 'result') return;
            clearTimeout(timer);
            ws.close();
            resolve(m.result!);
          });
          ws.on('error', reject);
        });
        assert.equal(who.pid, balancer.child.pid, 'served by the balancer');
        assert.ok(Date.now() - started < 10000, `served after ${Date.now() - started} ms`);
        assert.match(balancer.log(), /could not pass a connection on; serving it here/);
      } finally {
        other.child.kill('SIGCONT');
      }
      await clients.closeAll();
    });

    it('drops a server killed with -9 from the registry within its time to live', async () => {
      const killedAt = Date.now();
      other.child.kill('SIGKILL');
      await exited(other.child);
      await eventually(async () => (await stats(balancer)).cluster!.servers.length === 1, 'the dead server to expire', 5000);
      assert.ok(Date.now() - killedAt < 3000, 'gone within a few announce intervals');
      // New clients now all stay on the balancer.
      assert.deepEqual(new Set(await pids(await clients.open(balancer.url, 4))), new Set([balancer.child.pid]));
    });
  });

  it('keeps the registry in the app\'s MongoDB when asked (no Redis needed)', async () => {
    const database = freshDatabase(mongo!);
    const env = { MONGO_URL: database.url, REDIS_URL: '' };
    const [a, b] = await Promise.all([member(env, ['--discovery', 'mongo']), member(env, ['--discovery', 'mongo'])]);
    try {
      await eventually(async () => (await stats(a)).cluster?.servers.length === 2, 'both servers in MongoDB', 5000);
      b.child.kill('SIGKILL');
      await eventually(async () => (await stats(a)).cluster!.servers.length === 1, 'the killed server to expire', 5000);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
      await database.drop();
    }
  });

  it('ages MongoDB registry entries by the database\'s clock: servers whose clocks disagree by more than the time to live see each other, and a dead one drops out in time', async () => {
    const database = freshDatabase(mongo!);
    const env = (skewMs: number) => ({ MONGO_URL: database.url, REDIS_URL: '', PERSEID_TEST_CLOCK_SKEW_MS: String(skewMs), NODE_OPTIONS: `--import=${SKEW}` });
    // 5 s apart, where entries live 0.6 s (3 intervals of 200 ms).
    const [behind, ahead] = await Promise.all([member(env(-2500), ['--discovery', 'mongo']), member(env(2500), ['--discovery', 'mongo'])]);
    try {
      for (const server of [behind, ahead]) await eventually(async () => (await stats(server)).cluster?.servers.length === 2, `${server.url} to see both servers`, 5000);
      const killedAt = Date.now();
      ahead.child.kill('SIGKILL');
      await eventually(async () => (await stats(behind)).cluster!.servers.length === 1, 'the killed server to expire', 5000);
      assert.ok(Date.now() - killedAt < 3000, `gone after ${Date.now() - killedAt} ms, where entries live 600 ms`);
    } finally {
      await Promise.all([behind.stop(), ahead.stop()]);
      await database.drop();
    }
  });

  describe('fan-out over Redis', () => {
    let database: ReturnType<typeof freshDatabase>;
    const servers: PerseidProcess[] = [];
    const clients = new Clients();

    before(async () => {
      database = freshDatabase(mongo!);
      const env = { MONGO_URL: database.url, REDIS_URL: redis!, PERSEID_FANOUT: 'redis' };
      servers.push(...(await Promise.all([0, 1, 2].map(() => startPerseid(APP, ['--port', '0'], env)))));
    });
    after(async () => {
      await clients.closeAll();
      await Promise.all(servers.map((s) => s.stop()));
      await database?.drop();
    });

    it('sends each change only to the servers whose live queries need it', async () => {
      const [follower, onlyOne, writer] = servers as [PerseidProcess, PerseidProcess, PerseidProcess];
      const [all] = await clients.open(follower.url, 1);
      const [single] = await clients.open(onlyOne.url, 1);
      const [write] = await clients.open(writer.url, 1);
      const watched = await write!.call<string>('addItem', 0, 'writer');
      await all!.subscribe('items').ready();
      await single!.subscribe('item', watched).ready();
      // A server first follows a newly watched collection whole, then narrows to its documents' channels once those are
      // subscribed: measure only once the collection's channel has a single subscriber (the follower of it all).
      const redisClient = new Redis(redis!);
      try {
        const channel = `perseid:${database.dbName}:items`;
        await eventually(async () => ((await redisClient.pubsub('NUMSUB', channel)) as [string, number])[1] === 1, 'only the follower on the collection channel');
      } finally {
        redisClient.disconnect();
      }
      // The relay, starting to follow the collection, orders every server to re-read it once, on the control channel
      // that every server hears: wait for that order, and count such orders apart from changes. The follower tells the
      // relay on the bus that it watches the collection, so the order comes within round trips; should that word be
      // missed, the relay's 3 s checks find the collection (two of them: the follower's announcement, the relay's read).
      await eventually(async () => (await Promise.all(servers.map(async (s) => (await stats(s)).perseid_fanout_resyncs_received_total ?? 0))).every((n) => n >= 1), 'the relay\'s re-read order', 10000);
      const changesReceived = async (s: PerseidProcess) => {
        const figures = await stats(s);
        return (figures.perseid_fanout_received_total ?? 0) - (figures.perseid_fanout_resyncs_received_total ?? 0);
      };
      const before = await Promise.all(servers.map(changesReceived));

      const ids: string[] = [];
      for (let i = 1; i <= 40; i++) ids.push(await write!.call<string>('addItem', i, 'writer'));
      for (let n = 1; n <= 5; n++) await write!.call('setItem', watched, 100 + n);

      await eventually(() => ids.every((id) => all!.collection<Item>('items').fetch().some((item) => item.id === id)), 'every item on the follower');
      await eventually(() => single!.collection<Item>('items').fetch().find((item) => item.id === watched)?.n === 105, 'the watched item\'s last value');
      assert.equal(single!.collection<Item>('items').fetch().length, 1);
      const received = (await Promise.all(servers.map(changesReceived))).map((n, i) => n - before[i]!);
      assert.ok(received[0]! >= 45, `the follower of the whole collection received ${received[0]}`);
      // Its 5 updates from the writer, and each at most once more from the relay, which follows every change in the database
      // (polling it may see fewer); none of the 40 inserts.
      assert.ok(received[1]! >= 5 && received[1]! <= 10, `the follower of one document received ${received[1]} (its 5 updates, each at most twice)`);
      assert.equal(received[2], 0, 'the writer, following nothing, received nothing');
    });

    it('relays writes made outside Perseid from one change stream', async () => {
      const [all] = clients.all;
      const client = new MongoClient(database.url);
      try {
        const { insertedId } = await client.db().collection<{ _id: string; n: number }>('items').insertOne({ _id: 'from-the-shell', n: -1 });
        await eventually(() => all!.collection<Item>('items').fetch().some((item) => item.id === insertedId), 'the outside write', 10000);
      } finally {
        await client.close();
      }
      const relays = servers.filter((s) => /this server relays database changes/.test(s.log()));
      assert.equal(relays.length, 1, 'exactly one server relays');
    });
  });

  /**
   * Two servers fanning out over a Redis of their own (so what a test does to it touches no other suite), a client
   * of the first subscribed to `items` and one of the second to write with.
   */
  async function onPrivateRedis(
    env: Record<string, string>,
    test: (t: { privateRedis: RunningService; a: PerseidProcess; b: PerseidProcess; reader: SimpleDDP; writer: SimpleDDP }) => Promise<void>,
  ): Promise<void> {
    const privateRedis = await startService('redis');
    const database = freshDatabase(mongo!);
    const serverEnv = { MONGO_URL: database.url, REDIS_URL: privateRedis.url, PERSEID_FANOUT: 'redis', ...env };
    const [a, b] = await Promise.all([startPerseid(APP, ['--port', '0'], serverEnv), startPerseid(APP, ['--port', '0'], serverEnv)]);
    const clients = new Clients();
    try {
      const [reader] = await clients.open(a.url, 1);
      const [writer] = await clients.open(b.url, 1);
      await reader!.subscribe('items').ready();
      await test({ privateRedis, a, b, reader: reader!, writer: writer! });
    } finally {
      await clients.closeAll();
      await Promise.all([a.stop(), b.stop()]);
      await privateRedis.stop();
      await database.drop();
    }
  }

  it('converges after Redis restarts mid-run', async () => {
    await onPrivateRedis({}, async ({ privateRedis, a, b, reader, writer }) => {
      const ids = [await writer.call<string>('addItem', 1, 'before')];
      await eventually(() => reader.collection<Item>('items').fetch().length === 1, 'the first item');

      await privateRedis.stop();
      for (let i = 0; i < 10; i++) ids.push(await writer.call<string>('addItem', 100 + i, 'while Redis is down'));
      // Long enough for the relay's check (every 3 s) to fail twice: the log says so once.
      await sleep(6500);
      await privateRedis.restart();
      await eventually(() => ids.every((id) => reader.collection<Item>('items').fetch().some((item) => item.id === id)), 'every item after Redis returns', 15000);
      assert.match(a.log(), /redis connection lost/);
      assert.match(a.log(), /fan-out bus reconnected/);
      for (const server of [a, b]) assert.ok((server.log().match(/relay check failed/g) ?? []).length <= 1, server.log());
    });
  });

  it('delivers writes made while the connection a server publishes on was reconnecting to Redis', async () => {
    // No relay: its echo of each write from the database would cover a lost message, when its own publishing is not cut too.
    await onPrivateRedis({ PERSEID_RELAY: 'off' }, async ({ privateRedis, reader, writer }) => {
      const admin = new Redis(privateRedis.url);
      try {
        const ids: string[] = [];
        for (let i = 0; i < 3; i++) {
          // Drops the servers' command connections (the one that publishes among them), not their subscriptions: the
          // pub/sub connections stay up, so no server sees an outage of the bus.
          await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
          ids.push(await writer.call<string>('addItem', i, 'while the publisher reconnects'));
        }
        const missing = () => ids.filter((id) => !reader.collection<Item>('items').fetch().some((item) => item.id === id));
        await eventually(() => missing().length === 0, 'every item on the other server', 8000).catch((error: Error) => assert.fail(`${error.message}: missing ${missing().length} of ${ids.length}`));
      } finally {
        admin.disconnect();
      }
    });
  });

  /**
   * A proxy to `port` whose connections open so far can be made silent: kept open, nothing passed either way (a
   * partition between one server and Redis; connections opened later pass).
   */
  async function silencingProxy(port: number): Promise<{ url: string; silence(): void; close(): void }> {
    const open = new Set<Socket>();
    const silent = new Set<Socket>();
    const proxy = createServer((client) => {
      const upstream = connect(port, '127.0.0.1');
      for (const [from, to] of [[client, upstream], [upstream, client]] as const) {
        from.on('data', (data) => void (silent.has(client) || to.write(data)));
        from.on('close', () => to.destroy());
        from.on('error', () => to.destroy());
      }
      open.add(client);
      client.on('close', () => (open.delete(client), silent.delete(client)));
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    return {
      url: `redis://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
      silence: () => open.forEach((socket) => silent.add(socket)),
      close: () => {
        for (const socket of open) socket.destroy();
        proxy.close();
      },
    };
  }

  it('replaces a connection to Redis that stops answering without closing, and catches up', async () => {
    const privateRedis = await startService('redis');
    const proxy = await silencingProxy(privateRedis.port);
    const database = freshDatabase(mongo!);
    const env = { MONGO_URL: database.url, PERSEID_FANOUT: 'redis', PERSEID_RELAY: 'off' };
    const [cut, other] = await Promise.all([startPerseid(APP, ['--port', '0'], { ...env, REDIS_URL: proxy.url }), startPerseid(APP, ['--port', '0'], { ...env, REDIS_URL: privateRedis.url })]);
    const clients = new Clients();
    try {
      const [reader] = await clients.open(cut.url, 1);
      const [writer] = await clients.open(other.url, 1);
      await reader!.subscribe('items').ready();
      proxy.silence();
      const id = await writer!.call<string>('addItem', 1, 'while the first server hears nothing from Redis');
      await eventually(() => reader!.collection<Item>('items').fetch().some((item) => item.id === id), 'the write on the cut-off server', 15000);
      assert.equal((cut.log().match(/redis connection lost/g) ?? []).length, 1, cut.log());
    } finally {
      await clients.closeAll();
      await Promise.all([cut.stop(), other.stop()]);
      proxy.close();
      await privateRedis.stop();
      await database.drop();
    }
  });

  it('stops on SIGTERM while Redis does not answer (a partition)', async () => {
    const privateRedis = await startService('redis');
    const proxy = await silencingProxy(privateRedis.port);
    const database = freshDatabase(mongo!);
    const server = await member({ MONGO_URL: database.url, REDIS_URL: proxy.url, PERSEID_FANOUT: 'redis' }, ['--drain-ms', '1000']);
    try {
      proxy.silence();
      const signalled = Date.now();
      assert.equal(await Promise.race([server.stop('SIGTERM'), sleep(20000).then(() => 'still running after 20 s')]), 0, server.log());
      // What waits on Redis gives up once its connection has gone unanswered for 5 s.
      assert.ok(Date.now() - signalled < 12000, `stopping took ${Date.now() - signalled} ms with no client to drain:\n${server.log()}`);
    } finally {
      if (server.child.exitCode === null) await server.stop('SIGKILL');
      proxy.close();
      await privateRedis.stop();
      await database.drop();
    }
  });

  it('sends no client to another server while the registry cannot be read (it may have died meanwhile)', async () => {
    const privateRedis = await startService('redis');
    const database = freshDatabase(mongo!);
    const env = { MONGO_URL: database.url, REDIS_URL: privateRedis.url };
    const [balancer, other] = await Promise.all([member(env, ['--balancer']), member(env)]);
    const clients = new Clients();
    const baseUrl = async () => ((await (await fetch(`${balancer.url}/sockjs/info`)).json()) as { base_url?: string }).base_url;
    try {
      await settled(balancer, 2);
      await clients.open(balancer.url, 10, true);
      await eventually(async () => (await baseUrl()) === `${other.url}/sockjs`, 'the loaded balancer to pin SockJS clients to the other server');
      await privateRedis.stop();
      other.child.kill('SIGKILL');
      await exited(other.child);
      // Past the registry's time to live (3 intervals of 200 ms) and one refresh.
      await sleep(1500);
      assert.equal(await baseUrl(), undefined, 'a SockJS client was pinned to a server killed while Redis was down');
    } finally {
      await clients.closeAll();
      await Promise.all([balancer.stop(), other.stop()]);
      await privateRedis.stop();
      await database.drop();
    }
  });

  it('drains on SIGTERM while Redis is down, without waiting for the registry to answer', async () => {
    const privateRedis = await startService('redis');
    const database = freshDatabase(mongo!);
    const server = await member({ MONGO_URL: database.url, REDIS_URL: privateRedis.url }, ['--drain-ms', '1000']);
    try {
      await privateRedis.stop();
      // Long enough for the Redis clients' reconnection attempts to space out, as in a real outage.
      await sleep(3000);
      const signalled = Date.now();
      assert.equal(await server.stop('SIGTERM'), 0, server.log());
      const tookMs = Date.now() - signalled;
      assert.ok(tookMs < 6000, `stopping took ${tookMs} ms with no client to drain:\n${server.log()}`);
      assert.match(server.log(), /could not leave the registry in time/);
    } finally {
      if (server.child.exitCode === null) await server.stop('SIGKILL');
      await privateRedis.stop();
      await database.drop();
    }
  });

  it('drains on SIGTERM: clients move to the other server with nothing but a reconnect', async () => {
    const database = freshDatabase(mongo!);
    const env = { MONGO_URL: database.url, REDIS_URL: redis! };
    const [front, back] = await Promise.all([member(env, ['--balancer']), member(env, ['--drain-ms', '1000'])]);
    const clients = new Clients();
    try {
      await settled(front, 2);
      const opened = await clients.open(front.url, 20);
      for (const c of opened) await c.subscribe('items').ready();
      const placed = await pids(opened);
      const moved = count(placed, back.child.pid);
      assert.ok(moved >= 2, `the balancer passed ${moved} of 20 connections to the other server`);
      const disconnects: number[] = [];
      for (const c of opened) c.on('disconnected', () => disconnects.push(Date.now()));

      assert.equal(await back.stop('SIGTERM'), 0);
      await eventually(() => opened.every((c) => c.connected), 'every client reconnected', 10000);
      assert.equal(disconnects.length, moved, 'only the drained server\'s clients reconnected');
      assert.ok(Math.max(...disconnects) - Math.min(...disconnects) >= 400, 'closes spread over the drain window');
      assert.deepEqual(new Set(await pids(opened)), new Set([front.child.pid]));
      const id = await opened[0]!.call<string>('addItem', 7, 'after the drain');
      await eventually(() => opened.every((c) => c.collection<Item>('items').fetch().some((item) => item.id === id)), 'live data after the drain');
      assert.match(back.log(), /left the cluster/);
    } finally {
      await clients.closeAll();
      // `back` has normally drained already; if the test failed first, it must not outlive it.
      await Promise.all([front.stop(), back.stop('SIGKILL')]);
      await database.drop();
    }
  });
});
