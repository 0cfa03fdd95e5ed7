/**
 * Jobs across real processes on one MongoDB-wire database with Redis leases:
 * three processes that run jobs (two of them with clocks 1.5 s ahead and
 * behind) and one web process. Every scheduled run happens exactly once; a
 * thousand queued jobs each run once; a runner paused past its lease is
 * refused when it wakes; a runner killed with -9 mid-job has its run retried
 * once elsewhere; the web process runs none, and a jobs process serves no
 * clients while it stays in discovery and metrics.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import { MongoClient, type Db } from 'mongodb';
import SimpleDDP from 'simpleddp';
import WebSocket from 'ws';
import { serviceUrl } from '../scripts/services/control.js';
import { freePort } from '../scripts/services/process.js';
import type { JobRun } from '../src/jobs/history.js';
import { freshDatabase } from './databases.js';
import { needsServices } from './skips.js';
import { CLI, eventually, exited, startPerseid, type PerseidProcess } from './processes.js';

const APP = 'dist/test/fixtures/jobs-app.js';
const SKEW = pathToFileURL(resolve('dist/test/fixtures/skewed-clock.js')).href;
const mongo = await serviceUrl('mongo-java-server');
const redis = await serviceUrl('redis');
const skip = needsServices({ 'mongo-java-server': mongo, redis });

interface Stats {
  perseid_jobs_started_total?: number;
  perseid_jobs_results_refused_total?: number;
  jobs?: { role: string; runner: string; schedules: Array<{ job: string; nextRunAt: string }> };
  cluster?: { servers: Array<{ url: string; role?: string; memoryMb: number; methodP95Ms: number }> };
}

async function stats(server: PerseidProcess): Promise<Stats> {
  return (await (await fetch(`${server.url}/perseid/stats`)).json()) as Stats;
}

/** The pid in a runner's name (`host-pid-hex`, `.n` after a takeover). */
function pidOf(runner: string | null | undefined): number {
  return Number(/-(\d+)-[0-9a-f]{6}(?:\.\d+)?$/.exec(runner ?? '')?.[1]);
}

describe('jobs across processes', { skip }, () => {
  let database: ReturnType<typeof freshDatabase>;
  let client: MongoClient;
  let db: Db;
  let web: PerseidProcess;
  const runners: PerseidProcess[] = [];
  let ddp: SimpleDDP;
  const startedAt = Date.now();

  const member = async (role: string, skewMs: number, extra: string[] = []) => {
    const port = await freePort();
    return startPerseid(
      APP,
      ['--port', String(port), '--role', role, '--public-url', `http://127.0.0.1:${port}`, '--discovery-interval-ms', '200', '--jobs-lease-ms', '3000', '--jobs-poll-ms', '100', ...extra],
      { MONGO_URL: database.url, REDIS_URL: redis!, PERSEID_TEST_CLOCK_SKEW_MS: String(skewMs), NODE_OPTIONS: `--import=${SKEW}` },
    );
  };
  const runs = () => db.collection<JobRun>('perseid_jobs');

  before(async () => {
    database = freshDatabase(mongo!);
    client = new MongoClient(database.url);
    db = client.db(database.dbName);
    web = await member('web', 0, ['--balancer']);
    runners.push(...(await Promise.all([member('all', 1500), member('jobs', -1500), member('jobs', 0)])));
    ddp = new SimpleDDP({ endpoint: `${web.url.replace(/^http/, 'ws')}/websocket`, SocketConstructor: WebSocket, reconnectInterval: 100 });
    await ddp.connect();
  });
  after(async () => {
    await ddp?.disconnect().catch(() => undefined);
    await Promise.all([web, ...runners].map((p) => p?.stop()));
    await client?.close();
    await database?.drop();
  });

  it('a jobs process serves no DDP clients, yet answers /health and stats and is in discovery with its role', async () => {
    const jobsOnly = runners[1]!;
    const health = (await (await fetch(`${jobsOnly.url}/health`)).json()) as { status: string; role: string };
    assert.deepEqual([health.status, health.role], ['ok', 'jobs']);
    const refused = await fetch(`${jobsOnly.url}/sockjs/info`);
    assert.equal(refused.status, 503);
    assert.match(await refused.text(), /runs jobs only/);
    const upgrade = await new Promise<number>((done) => {
      const ws = new WebSocket(`${jobsOnly.url.replace(/^http/, 'ws')}/websocket`);
      ws.on('unexpected-response', (_req, res) => done(res.statusCode ?? 0));
      ws.on('open', () => done(101));
      ws.on('error', () => undefined);
    });
    assert.equal(upgrade, 503);
    await eventually(async () => (await stats(web)).cluster?.servers.length === 4, 'four servers in discovery');
    const entry = (await stats(web)).cluster!.servers.find((s) => s.url === jobsOnly.url)!;
    assert.equal(entry.role, 'jobs');
    assert.ok(entry.memoryMb > 10, `memory ${entry.memoryMb} MB`);
    assert.equal((await stats(jobsOnly)).jobs?.role, 'jobs');
  });

  it('sends no client to a jobs process through the balancer', async () => {
    const jobsPids = new Set(runners.slice(1).map((p) => p.child.pid));
    const clients = await Promise.all(
      Array.from({ length: 16 }, async () => {
        const c = new SimpleDDP({ endpoint: `${web.url.replace(/^http/, 'ws')}/websocket`, SocketConstructor: WebSocket });
        await c.connect();
        return c;
      }),
    );
    try {
      const pids = await Promise.all(clients.map(async (c) => (await c.call<{ pid: number }>('whoami')).pid));
      assert.ok(pids.every((pid) => !jobsPids.has(pid)), `a client reached a jobs process: ${JSON.stringify(pids)}`);
    } finally {
      await Promise.all(clients.map((c) => c.disconnect()));
    }
  });

  it('runs every scheduled run exactly once, whichever clock is ahead, and never on the web process', async () => {
    const from = Math.ceil((Date.now() + 1000) / 1000) * 1000;
    await eventually(async () => (await db.collection('ticks').countDocuments({ due: { $gte: new Date(from + 10_000) } })) > 0, 'ten seconds of ticks', 20_000);
    await new Promise((r) => setTimeout(r, 2500)); // late duplicates, if any, would arrive now
    const window = { $gte: new Date(from), $lt: new Date(from + 10_000) };
    const ticks = await db.collection<{ due: Date; pid: number }>('ticks').find({ due: window }).toArray();
    const records = await runs().find({ job: 'tick', scheduledAt: window }).toArray();
    const dues = ticks.map((t) => t.due.getTime()).sort((a, b) => a - b);
    const shown = records.map((r) => `${r._id} ${r.status} ${r.runner} ${r.error ?? ''}`).join('\n');
    const expected = Array.from({ length: 10 }, (_, i) => from + i * 1000);
    if (JSON.stringify(dues) !== JSON.stringify(expected)) assert.fail(`each second must run exactly once; ran ${dues.map((d) => new Date(d).toISOString()).join(', ')}; records:\n${shown}`);
    assert.equal(records.length, 10);
    assert.ok(records.every((r) => r.status === 'succeeded' && r.attempts === 1), JSON.stringify(records.filter((r) => r.status !== 'succeeded')));
    const pids = new Set(ticks.map((t) => t.pid));
    assert.ok(!pids.has(web.child.pid!), 'the web process ran a scheduled job');
    assert.deepEqual(new Set(records.map((r) => pidOf(r.runner))), pids);
    assert.equal((await stats(web)).perseid_jobs_started_total ?? 0, 0);
    assert.equal((await stats(web)).jobs, undefined, 'the web process shows a jobs engine');
    const next = (await stats(runners[0]!)).jobs!.schedules.find((s) => s.job === 'tick')!;
    assert.ok(Date.parse(next.nextRunAt) > startedAt);
  });

  it('runs each of 1,000 queued jobs once, enqueued by the web process and run by the others', async () => {
    assert.equal(await ddp.call('enqueueMany', 1000), 1000);
    const effects = db.collection<{ n?: number; pid: number }>('effects');
    await eventually(async () => (await runs().countDocuments({ job: 'work', status: 'succeeded' })) === 1000, '1000 runs to succeed', 60_000);
    const done = await effects.find({ n: { $exists: true } }).toArray();
    assert.equal(done.length, 1000, 'a job ran more than once, or not at all');
    assert.equal(new Set(done.map((e) => e.n)).size, 1000);
    const byPid = new Map<number, number>();
    for (const e of done) byPid.set(e.pid, (byPid.get(e.pid) ?? 0) + 1);
    assert.ok(!byPid.has(web.child.pid!), 'the web process ran queued jobs');
    assert.ok(byPid.size >= 2, `one process ran them all: ${JSON.stringify([...byPid])}`);
  });

  it("shows the cluster's jobs on the web process's dashboard and perseid top, read-only, counting no runs on its /metrics", async () => {
    interface Shown { readOnly?: boolean; runner?: string; jobs: Array<{ job: string; runs: number; succeeded: number; runningOn?: string[]; nextRunAt?: string; lastFinishedAt?: string }> }
    const shown = async (server: PerseidProcess) => ((await (await fetch(`${server.url}/perseid/apm`)).json()) as { jobs?: Shown }).jobs;
    const { id } = await slowRunning(4000);
    const slowRunner = (await runs().findOne({ _id: id }))!.runner!;
    // The history every process shares, as the web process and a jobs process read it at once.
    const [onWeb, onRunner] = await Promise.all([shown(web), shown(runners[2]!)]);
    assert.equal(onWeb?.readOnly, true, `the web process shows no jobs: ${JSON.stringify(onWeb)}`);
    assert.equal(onWeb.runner, undefined);
    const tick = onWeb.jobs.find((j) => j.job === 'tick')!;
    const tickThere = onRunner!.jobs.find((j) => j.job === 'tick')!;
    assert.ok(tick.succeeded >= 10 && Math.abs(tick.succeeded - tickThere.succeeded) <= 2, `tick: ${JSON.stringify(tick)} on web, ${JSON.stringify(tickThere)} on a jobs process`);
    assert.ok(Date.parse(tick.nextRunAt!) > Date.now() - 5000 && tick.lastFinishedAt !== undefined, JSON.stringify(tick));
    assert.ok(onWeb.jobs.some((j) => j.job === 'work' && j.succeeded > 0), JSON.stringify(onWeb.jobs));
    // Which process runs it, to look at its log.
    assert.deepEqual(onWeb.jobs.find((j) => j.job === 'slow')?.runningOn, [slowRunner]);
    // Runs are counted where they ran, so a sum over every server's /metrics counts each once.
    const metricsText = await (await fetch(`${web.url}/metrics`)).text();
    assert.doesNotMatch(metricsText, /^perseid_job_runs_total\{job="tick"/m);
    const top = spawn(process.execPath, [CLI, 'top', '--url', web.url, '--once'], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 20_000 });
    let out = '';
    top.stdout.on('data', (c: Buffer) => void (out += c.toString()));
    top.stderr.on('data', (c: Buffer) => void (out += c.toString()));
    assert.equal(await new Promise((done) => top.on('close', done)), 0, out);
    assert.match(out, /^Jobs \(read from the app's database: this server runs none, its jobs processes do\)$/m);
    assert.match(out, /^ *tick +\d+ +0 /m);
    assert.match(out, new RegExp(`^ *slow +\\d+ +0 +[\\d–]+ +${slowRunner} `, 'm'));
    await eventually(async () => (await runs().findOne({ _id: id }))?.status === 'succeeded', 'the slow run to end', 10_000);
  });

  /** Enqueues a slow job and waits for a process to start it; resolves with the run id and its runner. */
  async function slowRunning(ms: number): Promise<{ id: string; runner: PerseidProcess }> {
    const id = await ddp.call<string>('enqueueSlow', ms);
    let run: JobRun | null = null;
    await eventually(async () => (run = await runs().findOne({ _id: id }))?.status === 'running', 'the slow job to start', 10_000);
    const runner = runners.find((p) => p.child.pid === pidOf(run!.runner));
    assert.ok(runner, `run by an unknown process: ${run!.runner}`);
    return { id, runner };
  }

  it('refuses the result of a runner paused past its lease, after another process ran the job', async () => {
    const { id, runner } = await slowRunning(2500);
    const refusedBefore = (await stats(runner)).perseid_jobs_results_refused_total ?? 0;
    runner.child.kill('SIGSTOP');
    let run: JobRun | null = null;
    try {
      await eventually(async () => (run = await runs().findOne({ _id: id }))?.status === 'succeeded', 'another process to finish the run', 15_000);
    } finally {
      runner.child.kill('SIGCONT');
    }
    assert.equal(run!.attempts, 2);
    assert.notEqual(pidOf(run!.runner), runner.child.pid);
    assert.deepEqual(run!.result, { pid: pidOf(run!.runner) });
    assert.deepEqual(run!.attemptLog.map((a) => a.outcome), ['lost', 'succeeded']);
    await eventually(async () => ((await stats(runner)).perseid_jobs_results_refused_total ?? 0) > refusedBefore, 'the paused runner to be refused', 10_000);
    const after = (await runs().findOne({ _id: id }))!;
    assert.deepEqual([after.status, after.runner, after.attemptLog.length], ['succeeded', run!.runner, 2]);
    assert.match(runner.log(), /result refused: this runner lost its lease/);
  });

  it('retries once elsewhere the run of a runner killed with -9 mid-job, and records its result once', async () => {
    const { id, runner } = await slowRunning(2000);
    runner.child.kill('SIGKILL');
    await exited(runner.child);
    let run: JobRun | null = null;
    await eventually(async () => (run = await runs().findOne({ _id: id }))?.status === 'succeeded', 'the run to be retried and finish', 15_000);
    assert.equal(run!.attempts, 2);
    assert.deepEqual(run!.attemptLog.map((a) => [pidOf(a.runner) === runner.child.pid, a.outcome]), [[true, 'lost'], [false, 'succeeded']]);
    assert.equal(await db.collection('effects').countDocuments({ run: id }), 1, 'the result was recorded more than once');
  });
});
