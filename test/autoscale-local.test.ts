/**
 * The autoscaler end to end, as real processes on loopback with Redis and
 * mongo-java-server: one balancing server as the front door, `perseid
 * autoscale --local` adding and draining servers of the same app, and
 * `perseid load` ramping users up through the front door. Servers are added
 * and new clients spread to them; when the users leave, the added servers
 * drain and are removed, and clients that were on them see a reconnect and
 * nothing worse. The decisions are in the autoscaler's log, and its
 * Prometheus endpoint exports the desired count and each server's load.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import SimpleDDP from 'simpleddp';
import WebSocket from 'ws';
import type { LoadReport } from '../src/load/report/model.js';
import { serviceUrl } from '../scripts/services/control.js';
import { freePort } from '../scripts/services/process.js';
import { freshDatabase } from './databases.js';
import { needsServices } from './skips.js';
import { CLI, eventually, exited, startPerseid, type PerseidProcess } from './processes.js';

const APP = 'dist/test/fixtures/cluster-app.js';
const mongo = await serviceUrl('mongo-java-server');
const redis = await serviceUrl('redis');
const skip = needsServices({ 'mongo-java-server': mongo, redis });

interface Stats {
  cluster?: { servers: Array<{ url: string; sessions: number; cpuPercent: number; lagMs: number }> };
}

/** Rejects with `what` if `promise` has not settled within `ms` (a test that waits for ever says nothing). */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** A client that stays and keeps calling, waiting out reconnects; it records what it saw. */
class Stayer {
  readonly pids: number[] = [];
  readonly errors: string[] = [];
  disconnects = 0;
  /**
   * Calls sent just as a draining server closed the connection: the server leaves them unread for the client to send
   * again after reconnecting, as Meteor's client and ours do; simpleddp never does, so they get no answer.
   */
  unansweredAcrossReconnect = 0;
  private stopped = false;
  private loop: Promise<void> | undefined;
  constructor(readonly ddp: SimpleDDP) {
    ddp.on('disconnected', () => void this.disconnects++);
  }
  start(): void {
    this.loop = (async () => {
      while (!this.stopped) {
        if (this.ddp.connected) {
          const disconnectsBefore = this.disconnects;
          try {
            const { pid } = await within(this.ddp.call<{ pid: number }>('whoami'), 5000, 'whoami');
            if (this.pids.at(-1) !== pid) this.pids.push(pid);
          } catch (error) {
            if (this.disconnects > disconnectsBefore && /no answer/.test(String(error))) this.unansweredAcrossReconnect++;
            else this.errors.push(String((error as Error).message ?? error));
          }
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    })();
  }
  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
    await within(this.ddp.disconnect(), 5000, 'disconnecting').catch(() => undefined);
  }
}

/**
 * Waits for `child` to exit, at most `ms`; then kills it and says so (a hang here once held the whole file to its
 * time limit without a word about which process it was).
 */
async function exitedWithin(child: ChildProcess, ms: number, what: () => string): Promise<number | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), ms)));
  const outcome = await Promise.race([exited(child), late]);
  clearTimeout(timer);
  if (outcome !== 'late') return outcome;
  const description = what();
  console.error(`${description} had not exited after ${ms} ms; killed`);
  child.kill('SIGKILL');
  await exited(child);
  throw new Error(`${description} had not exited after ${ms} ms`);
}

describe('perseid autoscale --local, with perseid load', { skip }, () => {
  let database: ReturnType<typeof freshDatabase>;
  let front: PerseidProcess;
  let autoscaleLog = '';
  let autoscale: ReturnType<typeof spawn>;
  let metricsPort: number;
  const dir = mkdtempSync(join(tmpdir(), 'perseid-autoscale-'));
  const env = () => ({ ...process.env, MONGO_URL: database.url, REDIS_URL: redis!, PERSEID_LOG_LEVEL: 'warn' });

  before(async () => {
    database = freshDatabase(mongo!);
    const port = await freePort();
    front = await startPerseid(APP, ['--port', String(port), '--public-url', `http://127.0.0.1:${port}`, '--balancer', '--discovery-interval-ms', '200'], {
      MONGO_URL: database.url,
      REDIS_URL: redis!,
    });
    metricsPort = await freePort();
    autoscale = spawn(
      process.execPath,
      [
        CLI, 'autoscale', '--local', APP,
        '--local-arg=--discovery-interval-ms=200', '--local-arg=--drain-ms=1500',
        '--min', '1', '--max', '3', '--rule', 'sessions:6:3',
        '--hold-s', '1', '--window-s', '10', '--interval-s', '0.5', '--min-samples', '2', '--up-cooldown-s', '3', '--down-cooldown-s', '3',
        '--discovery-interval-ms', '200', '--metrics-port', String(metricsPort), '--log-level', 'info',
      ],
      { env: env(), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    autoscale.stdout!.on('data', (chunk: Buffer) => void (autoscaleLog += chunk.toString()));
    autoscale.stderr!.on('data', (chunk: Buffer) => void (autoscaleLog += chunk.toString()));
  });
  after(async () => {
    if (autoscale && autoscale.exitCode === null) {
      autoscale.kill('SIGTERM');
      await exitedWithin(autoscale, 20000, () => `perseid autoscale (its log:\n${autoscaleLog.slice(-2000)})`);
    }
    if (front) {
      front.child.kill('SIGTERM');
      await exitedWithin(front.child, 20000, () => `the front server (its log:\n${front.log().slice(-2000)})`);
    }
    await database?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const servers = async () => ((await (await fetch(`${front.url}/perseid/stats`, { signal: AbortSignal.timeout(5000) })).json()) as Stats).cluster?.servers ?? [];

  it('adds servers as users arrive, spreads new clients to them, drains them when the users leave without errors, and exports it all', async () => {
    await eventually(() => /hold at 1 \(/.test(autoscaleLog), 'the autoscaler to see the front server', 45000);
    const until = Date.now() + 32_000;
    const reportFile = join(dir, 'load.json');
    const load = spawn(
      process.execPath,
      [CLI, 'load', 'dist/test/fixtures/hold-scenario.js', '--url', front.url, '--phase', '24:2', '--param', `until=${until}`, '--timeout-ms', '20000', '--grace', '30', '--json', reportFile],
      { env: env(), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let loadLog = '';
    load.stdout!.on('data', (c: Buffer) => void (loadLog += c.toString()));
    load.stderr!.on('data', (c: Buffer) => void (loadLog += c.toString()));

    // Once the cluster has grown, clients that will stay: the front door passes them to the less loaded servers
    // (not to one still busy starting up, which the balancer rightly counts as loaded).
    await eventually(async () => {
      const added = (await servers()).filter((s) => s.url !== front.url);
      // Without event-loop lag too: the balancer rightly sends no client to a lagging server (see loadScore).
      return added.length >= 1 && added.every((s) => s.cpuPercent < 50 && s.lagMs < 20);
    }, 'a second server, started and idle', 30000);
    const stayers = await Promise.all(
      Array.from({ length: 4 }, async () => {
        const ddp = new SimpleDDP({ endpoint: `${front.url.replace(/^http/, 'ws')}/websocket`, SocketConstructor: WebSocket, reconnectInterval: 200 });
        await within(ddp.connect(), 10000, 'a staying client connecting');
        await within(ddp.subscribe('items').ready(), 10000, 'a staying client subscribing');
        const stayer = new Stayer(ddp);
        stayer.start();
        return stayer;
      }),
    );
    try {
      assert.equal(await exitedWithin(load, 90000, () => `perseid load (its output:\n${loadLog.slice(-2000)})`), 0, `perseid load failed:\n${loadLog}`);
      const report = JSON.parse(readFileSync(reportFile, 'utf8')) as LoadReport;
      assert.deepEqual(report.errors, {}, `load users saw errors:\n${loadLog}`);
      const servedBy = Object.keys(report.counts).filter((k) => k.startsWith('served by '));
      assert.ok(servedBy.length >= 2, `all load users were served by one process: ${JSON.stringify(report.counts)}`);

      // The users left: the added servers drain and go, down to the minimum (the front server was not started by the autoscaler).
      await eventually(async () => (await servers()).length === 1, 'the cluster to shrink back to one server', 40000);
      // The drained servers close their connections over --drain-ms; every staying client reconnects to the one left.
      await eventually(() => stayers.every((s) => s.pids.at(-1) === front.child.pid), 'every staying client to be served by the remaining server', 15000);
      const moved = stayers.filter((s) => s.pids.length > 1);
      assert.ok(moved.length >= 1, `no staying client was on a drained server: ${JSON.stringify(stayers.map((s) => s.pids))}`);
      for (const s of stayers) {
        assert.deepEqual(s.errors, [], 'a staying client saw an error');
        assert.ok(s.unansweredAcrossReconnect <= 1, 'a staying client lost more than the one call it had in flight at its reconnect');
      }
      for (const s of moved) assert.ok(s.disconnects >= 1);
    } finally {
      await Promise.all(stayers.map((s) => s.stop()));
    }
    assert.match(autoscaleLog, /scale up to 2 \(sessions [\d.]+ per server > 6 for 1 s\)/);
    assert.match(autoscaleLog, /scale down to \d \(every rule under its lower threshold/);
    assert.match(autoscaleLog, /draining a local server/);
    assert.match(autoscaleLog, /servers \d\/\d {2}per server: sessions [\d.]+ {2}cpu [\d.]+% {2}lag [\d.]+ ms {2}memory \d+ MB {2}method p95 [\d.]+ ms/);

    // What it exports for Prometheus, after those rounds.
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    assert.match(text, /^perseid_autoscale_desired_instances 1$/m);
    assert.match(text, /^perseid_autoscale_changes_total\{direction="up"\} [1-9]/m);
    assert.match(text, /^perseid_autoscale_changes_total\{direction="down"\} [1-9]/m);
    assert.match(text, new RegExp(`^perseid_instance_sessions\\{instance="[^"]+",pod="[^"]*",url="${front.url}"\\} \\d+$`, 'm'));
    assert.match(text, /^# TYPE perseid_instance_method_p95_seconds gauge$/m);
  });
});
