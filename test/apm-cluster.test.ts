/**
 * A balancing cluster's /metrics: two real servers (processes on loopback)
 * sharing a registry in a real Redis; the balancer's scrape lists every
 * server's summary (sessions, CPU, event-loop delay, memory, methods/s,
 * p95) labelled by its registry id, as each announced it; its dashboard,
 * perseid top, advise and capacity name the server they read, since their
 * other figures are its own.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import SimpleDDP from 'simpleddp';
import WebSocket from 'ws';
import { serviceUrl } from '../scripts/services/control.js';
import { freePort } from '../scripts/services/process.js';
import { topScreen } from '../src/cli/apm.js';
import type { DashboardView } from '../src/metrics/dashboard-view.js';
import { redisKeyPrefix } from '../src/redis-keys.js';
import { freshDatabase } from './databases.js';
import { seriesValue } from './helpers.js';
import { CLI, eventually, startPerseid, type PerseidProcess } from './processes.js';
import { needsServices } from './skips.js';

const APP = 'dist/test/fixtures/cluster-app.js';
const mongo = await serviceUrl('mongo-java-server');
const redis = await serviceUrl('redis');
const skip = needsServices({ 'mongo-java-server': mongo, redis });

/** A raw WebSocket that says a balancer already chose this server, so it stays where it connects. */
class PassedOnWebSocket extends WebSocket {
  constructor(url: string) {
    super(url, { headers: { 'x-perseid-balanced': '1' } });
  }
}

async function member(env: NodeJS.ProcessEnv, extra: string[] = []): Promise<PerseidProcess> {
  const port = await freePort();
  return startPerseid(APP, ['--port', String(port), '--public-url', `http://127.0.0.1:${port}`, '--discovery-interval-ms', '200', ...extra], env);
}


describe("a balancing cluster's /metrics", { skip }, () => {
  let database: ReturnType<typeof freshDatabase>;
  let balancer: PerseidProcess;
  let other: PerseidProcess;
  const clients: SimpleDDP[] = [];

  before(async () => {
    database = freshDatabase(mongo!);
    const env = { MONGO_URL: database.url, REDIS_URL: redis! };
    [balancer, other] = await Promise.all([member(env, ['--balancer']), member(env)]);
  });

  after(async () => {
    await Promise.all(clients.map((c) => c.disconnect().catch(() => undefined)));
    await Promise.all([balancer?.stop(), other?.stop()]);
    await database?.drop();
  });

  it("lists every server's summary, labelled by server", async () => {
    const ids = async (server: PerseidProcess) => {
      const stats = (await (await fetch(`${server.url}/perseid/stats`)).json()) as { cluster?: { id: string; servers: Array<{ id: string; url: string }> } };
      return stats.cluster;
    };
    await eventually(async () => (await ids(balancer))?.servers.length === 2, 'the balancer to see both servers', 10000);
    const cluster = (await ids(balancer))!;
    const otherId = cluster.servers.find((s) => s.url === other.url)!.id;
    // Three clients on the other server, one on the balancer (kept there), each announced within 200 ms.
    const open = async (url: string) => {
      const client = new SimpleDDP({ endpoint: `${url.replace(/^http/, 'ws')}/websocket`, SocketConstructor: PassedOnWebSocket, reconnectInterval: 100 });
      clients.push(client);
      await client.connect();
      return client;
    };
    const [caller] = await Promise.all([open(other.url), open(other.url), open(other.url), open(balancer.url)]);
    let text = '';
    await eventually(
      async () => {
        // Calls keep coming until the other server announces a window that had some.
        await caller!.call('whoami');
        text = await (await fetch(`${balancer.url}/metrics`)).text();
        return seriesValue(text, `perseid_server_sessions{server="${otherId}"}`) === 3 && seriesValue(text, `perseid_server_sessions{server="${cluster.id}"}`) === 1 && (seriesValue(text, `perseid_server_methods_per_second{server="${otherId}"}`) ?? 0) > 0;
      },
      'the balancer to list both servers with their sessions and calls',
      15000,
    );
    for (const id of [cluster.id, otherId]) {
      assert.ok(seriesValue(text, `perseid_server_resident_memory_bytes{server="${id}"}`)! > 10 * 1024 * 1024, `memory of ${id}`);
      for (const family of ['perseid_server_cpu_percent', 'perseid_server_event_loop_delay_seconds', 'perseid_server_method_p95_seconds', 'perseid_server_methods_per_second']) {
        const v = seriesValue(text, `${family}{server="${id}"}`);
        assert.ok(v !== undefined && v >= 0, `${family} of ${id}: ${v}`);
      }
    }
    assert.equal(text.match(/^# TYPE perseid_server_sessions gauge$/gm)?.length, 1);
  });

  it('perseid top, advise, capacity and the dashboard name the server they read, whose figures they are', async () => {
    await eventually(async () => ((await (await fetch(`${balancer.url}/perseid/dashboard.json`)).json()) as DashboardView).servers.length >= 2, 'the balancer to list both servers', 10000);
    const view = (await (await fetch(`${balancer.url}/perseid/dashboard.json`)).json()) as DashboardView;
    const stats = (await (await fetch(`${balancer.url}/perseid/stats`)).json()) as { cluster: { id: string } };
    assert.equal(view.server, stats.cluster.id);
    const screen = topScreen(view);
    assert.match(screen.split('\n')[0]!, new RegExp(`^perseid top · server ${view.server} · `), screen);
    assert.match(screen, new RegExp(`the other tables are server ${view.server}'s alone`), screen);
    assert.match(screen, new RegExp(`^${view.server} \\(this one\\) `, 'm'), screen);
    // perseid advise and capacity too: "no query shape scans" was said of the server asked, not of the cluster.
    for (const command of ['advise', 'capacity']) {
      const run = spawnSync(process.execPath, [CLI, command, '--url', balancer.url], { encoding: 'utf8', timeout: 20000 });
      assert.equal(run.status, 0, run.stderr);
      assert.match(run.stdout.split('\n')[0]!, new RegExp(`^Server ${view.server} of a cluster: from .*, not the other servers' \\(ask each\\)\\.$`), run.stdout);
    }
  });

  it('lists the method calls per second of a server running workers', async () => {
    // A workers' primary announces for its workers: their calls per second summed, not none.
    const workers = await member({ MONGO_URL: database.url, REDIS_URL: redis! }, ['--workers', '1']);
    const client = new SimpleDDP({ endpoint: `${workers.url.replace(/^http/, 'ws')}/websocket`, SocketConstructor: PassedOnWebSocket, reconnectInterval: 100 });
    try {
      await client.connect();
      let id: string | undefined;
      await eventually(
        async () => {
          const stats = (await (await fetch(`${balancer.url}/perseid/stats`)).json()) as { cluster?: { servers: Array<{ id: string; url: string }> } };
          id = stats.cluster?.servers.find((s) => s.url === workers.url)?.id;
          return id !== undefined;
        },
        'the balancer to see the server running workers',
        15000,
      );
      // Calls keep coming until its primary announces a window that had some (it said 0 whatever its workers did).
      await eventually(
        async () => {
          await Promise.all(Array.from({ length: 5 }, () => client.call('whoami')));
          const text = await (await fetch(`${balancer.url}/metrics`)).text();
          return (seriesValue(text, `perseid_server_methods_per_second{server="${id}"}`) ?? 0) > 0;
        },
        'the balancer to list the method calls of the server running workers',
        15000,
      );
      // Its primary's dashboard names it too.
      assert.equal(((await (await fetch(`${workers.url}/perseid/dashboard.json`)).json()) as DashboardView).server, id);
    } finally {
      await client.disconnect().catch(() => undefined);
      await workers.stop();
    }
  });

  it('lists a server of an older version, which announced no memory nor method times, with numbers', async () => {
    // The entry format of the first clustered release: sessions, lag and CPU only.
    const old = new Redis(redis!);
    const id = 'older-server';
    try {
      const entry = { id, url: 'http://127.0.0.1:9', balancer: false, sessions: 2, lagMs: 0, cpuPercent: 1, updatedAt: Date.now() };
      await old.set(`${redisKeyPrefix(database.url)}servers:${id}`, JSON.stringify(entry), 'PX', 60000);
      let text = '';
      await eventually(async () => (text = await (await fetch(`${balancer.url}/metrics`)).text()).includes(`server="${id}"`), 'the balancer to list the older server', 5000);
      const values = text.split('\n').filter((line) => line.startsWith('perseid_server_') && line.includes(`{server="${id}"}`));
      assert.ok(values.length >= 6 && values.every((line) => Number.isFinite(Number(line.split(' ').at(-1)))), values.join('\n'));
    } finally {
      await old.del(`${redisKeyPrefix(database.url)}servers:${id}`);
      old.disconnect();
    }
  });
});
