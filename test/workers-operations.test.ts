/**
 * What an operator reads from `perseid start` on MongoDB (real processes on
 * mongo-java-server). With `--workers 2`: `/perseid/stats` covers the machine
 * as `/metrics` and the dashboard do (the workers' sessions, live queries and
 * jobs), the dashboard merges what the workers measured alike (query shapes)
 * and says which worker each slowest call and error ran on, and each worker's
 * log lines say which worker wrote them. With workers or
 * without, the last line says the process stopped.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MongoClient } from 'mongodb';
import SimpleDDP from 'simpleddp';
import WebSocket from 'ws';
import { serviceUrl } from '../scripts/services/control.js';
import { topScreen } from '../src/cli/apm.js';
import type { JobRun } from '../src/jobs/history.js';
import type { DashboardView } from '../src/metrics/dashboard-view.js';
import { freshDatabase } from './databases.js';
import { eventually, exited, SockjsPeer, startPerseid, type PerseidProcess } from './processes.js';
import { needsServices } from './skips.js';

const APP = 'dist/test/fixtures/workers-app.js';
const mongo = await serviceUrl('mongo-java-server');

interface Stats {
  perseid_sessions: number;
  liveQueries?: Array<{ worker: number; collection: string; selector: unknown }>;
  jobs?: { runners: string[]; schedules: Array<{ job: string; nextRunAt?: string }>; recent: Array<{ job: string; runner: string }> };
  workers: Array<{ id: number; pid: number }>;
  primary: { pid: number };
}

describe('perseid start --workers 2: what an operator reads', { skip: needsServices({ 'mongo-java-server': mongo }) }, () => {
  let primary: PerseidProcess;
  let database: ReturnType<typeof freshDatabase>;
  const clients: SimpleDDP[] = [];
  /** Which worker each client is on. */
  const on = new Map<SimpleDDP, string>();

  before(async () => {
    database = freshDatabase(mongo!);
    // Behind one proxy (HTTP_FORWARDED_COUNT=1), as in production: the primary must still read its workers.
    primary = await startPerseid(APP, ['--port', '0', '--workers', '2', '--drain-ms', '1000'], { MONGO_URL: database.url, PERSEID_LOG_LEVEL: 'info', HTTP_FORWARDED_COUNT: '1' });
    // Clients, each following its own notes, until both workers have some.
    for (let i = 0; i < 30 && (clients.length < 6 || new Set(on.values()).size < 2); i++) {
      const client = new SimpleDDP({ endpoint: `${primary.url.replace(/^http/, 'ws')}/websocket`, SocketConstructor: WebSocket, reconnectInterval: 200 });
      await client.connect();
      on.set(client, (await client.call<{ worker: string }>('whoami')).worker);
      await client.subscribe('notes', `owner-${i}`).ready();
      clients.push(client);
    }
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.disconnect().catch(() => undefined)));
    if (primary && primary.child.exitCode === null) await primary.stop('SIGTERM');
    await database?.drop();
  });

  /** An operator asks through the proxy, from its host. */
  const asked = (path: string) => fetch(`${primary.url}${path}`, { headers: { 'x-forwarded-for': '127.0.0.1' } });
  const stats = async () => (await (await asked('/perseid/stats')).json()) as Stats;

  it('/perseid/stats counts the workers\' sessions, lists their live queries and their jobs', async () => {
    assert.equal(new Set(on.values()).size, 2, 'clients on both workers');
    await eventually(async () => (await stats()).jobs?.recent.length !== undefined && (await stats()).jobs!.recent.length > 0, 'a finished run of the schedule', 15000);
    const s = await stats();
    assert.equal(s.perseid_sessions, clients.length);
    const ids = s.workers.map((w) => w.id).sort();
    assert.deepEqual(ids, [1, 2]);
    assert.equal(s.liveQueries?.length, clients.length, JSON.stringify(s.liveQueries));
    assert.deepEqual([...new Set(s.liveQueries!.map((q) => q.worker))].sort(), ids, 'each live query says its worker');
    assert.ok(s.liveQueries!.every((q) => q.collection === 'notes'));
    assert.equal(s.jobs!.runners.length, 2, 'both workers run jobs');
    const tick = s.jobs!.schedules.find((x) => x.job === 'tick');
    assert.ok(tick?.nextRunAt && Date.parse(tick.nextRunAt) > Date.now() - 2000, `the schedule's next run: ${JSON.stringify(s.jobs)}`);
    assert.ok(s.jobs!.recent.every((run) => run.job === 'tick' && s.jobs!.runners.includes(run.runner)));
    assert.equal(s.primary.pid, primary.child.pid);
  });

  it('the dashboard lists each query shape once, summed over the workers, as it lists methods', async () => {
    const view = (await (await asked('/perseid/dashboard.json')).json()) as {
      shapes: Array<{ collection: string; shape: string; ops: number }>;
      processes: Array<{ worker: string; lagP99: number; lagMax: number }>;
    };
    // Each worker's and the primary's longest event-loop delay of the minute, which the p99 cannot be above.
    assert.deepEqual(view.processes.map((p) => p.worker).sort(), ['1', '2', 'primary']);
    for (const p of view.processes) assert.ok(p.lagMax >= p.lagP99, JSON.stringify(p));
    const keys = view.shapes.map((s) => `${s.collection} ${s.shape}`);
    assert.deepEqual(keys, [...new Set(keys)], 'a shape repeated');
    const notes = view.shapes.filter((s) => s.collection === 'notes');
    assert.equal(notes.length, 1, JSON.stringify(view.shapes));
    // Each subscription read its notes once, on its own worker.
    assert.ok(notes[0]!.ops >= clients.length, JSON.stringify(notes));
  });

  it('the slowest calls and the recent errors say which worker they ran on, in the dashboard and perseid top', async () => {
    for (const client of clients) await client.call('fail').catch(() => undefined);
    const view = (await (await asked('/perseid/dashboard.json')).json()) as DashboardView;
    const workers = [...new Set(on.values())].sort();
    const failures = view.errors.filter((e) => e.name === 'fail');
    assert.deepEqual(failures.map((e) => e.worker).sort(), workers, JSON.stringify(failures));
    for (const e of failures) assert.equal(e.count, [...on.values()].filter((w) => w === e.worker).length, `the failures on worker ${e.worker}`);
    // Each worker keeps its own slowest whoami.
    assert.deepEqual(view.traces.filter((t) => t.name === 'whoami').map((t) => t.worker).sort(), workers);
    const screen = topScreen(view);
    for (const worker of workers) {
      assert.match(screen, new RegExp(`× method fail \\(worker ${worker}\\): failed on purpose`), screen);
      assert.match(screen, new RegExp(`method whoami \\(worker ${worker}\\) `), screen);
    }
  });

  it('on SIGTERM, each worker\'s lines say which it is, and the last says the machine stopped', async () => {
    assert.equal(await primary.stop('SIGTERM'), 0, primary.log());
    const lines = primary.log().trim().split('\n');
    const worker = (line: string) => / worker=(\d+)$/.exec(line)?.[1];
    assert.deepEqual(lines.filter((l) => / \[server\] draining /.test(l)).map(worker).sort(), ['1', '2'], lines.join('\n'));
    // The workers' database lines (they follow the primary's feed) too, and the jobs engine's.
    assert.deepEqual([...new Set(lines.filter((l) => / \[mongo\] connected .*the primary's/.test(l)).map(worker))].sort(), ['1', '2']);
    assert.deepEqual([...new Set(lines.filter((l) => / \[perseid:jobs\] running jobs /.test(l)).map(worker))].sort(), ['1', '2']);
    assert.deepEqual(lines.filter((l) => / \[perseid\] stopped ms=\d+ worker=\d$/.test(l)).map(worker).sort(), ['1', '2']);
    assert.match(lines.at(-1)!, / INFO {2}\[perseid\] stopped ms=\d+$/, 'the primary\'s line, after its workers\'');
    assert.doesNotMatch(primary.log(), /could not read a worker/);
  });
});

describe('perseid start --workers 2, signalled as a service manager does it: every process of the machine at once', { skip: needsServices({ 'mongo-java-server': mongo }) }, () => {
  // systemd signals every process of a service's cgroup, a terminal every process of its group (Ctrl-C, or SIGHUP when
  // it closes): the workers get the signal as their primary does, and must leave the stopping to it.
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
    it(`${signal === 'SIGTERM' ? 'drains over the window' : 'stops at once'}, each worker stopping cleanly, on ${signal}`, async () => {
      const database = freshDatabase(mongo!);
      const primary = await startPerseid(APP, ['--port', '0', '--workers', '2', '--drain-ms', '1500'], { MONGO_URL: database.url, PERSEID_LOG_LEVEL: 'info' });
      const clients: SimpleDDP[] = [];
      try {
        const disconnects: number[] = [];
        for (let i = 0; i < 8; i++) {
          const client = new SimpleDDP({ endpoint: `${primary.url.replace(/^http/, 'ws')}/websocket`, SocketConstructor: WebSocket, autoReconnect: false });
          await client.connect();
          await client.subscribe('notes', `owner-${i}`).ready();
          client.on('disconnected', () => disconnects.push(Date.now()));
          clients.push(client);
        }
        const { workers } = (await (await fetch(`${primary.url}/perseid/stats`)).json()) as Stats;
        assert.equal(workers.length, 2);
        for (const pid of [primary.child.pid!, ...workers.map((w) => w.pid)]) process.kill(pid, signal);
        assert.equal(await exited(primary.child), 0, primary.log());
        const worker = (line: string) => / worker=(\d+)$/.exec(line)?.[1];
        const lines = primary.log().trim().split('\n');
        assert.deepEqual(lines.filter((l) => / \[perseid\] stopped ms=\d+ worker=\d$/.test(l)).map(worker).sort(), ['1', '2'], primary.log());
        assert.doesNotMatch(primary.log(), /worker died/);
        await eventually(() => disconnects.length === 8, 'every client to be disconnected');
        const spread = Math.max(...disconnects) - Math.min(...disconnects);
        if (signal === 'SIGTERM') assert.ok(spread >= 500, `closes spread over ${spread} ms of a 1500 ms drain window`);
      } finally {
        await Promise.all(clients.map((c) => c.disconnect().catch(() => undefined)));
        if (primary.child.exitCode === null) await primary.stop('SIGKILL');
        await database.drop();
      }
    });
  }
});

describe('perseid start --workers 2 with HTTP_FORWARDED_COUNT unset', { skip: needsServices({ 'mongo-java-server': mongo }) }, () => {
  it('warns once, in the primary, when connections come through a proxy, and not for its own relaying of SockJS', async () => {
    const database = freshDatabase(mongo!);
    const primary = await startPerseid(APP, ['--port', '0', '--workers', '2'], { MONGO_URL: database.url, PERSEID_LOG_LEVEL: 'info' });
    const url = `${primary.url.replace(/^http/, 'ws')}/websocket`;
    const warnings = () => primary.log().split('HTTP_FORWARDED_COUNT is not set').length - 1;
    const clients: SimpleDDP[] = [];
    const peers: SockjsPeer[] = [];
    try {
      // No proxy in front: the primary's own hop for SockJS's HTTP requests is not one.
      peers.push(await SockjsPeer.open(`${primary.url}/sockjs`, 'xhr-polling'));
      await peers[0]!.call('p', 'whoami');
      assert.equal(warnings(), 0, primary.log());
      /** A raw WebSocket as nginx passes one on: the client's address in X-Forwarded-For. */
      class Proxied extends WebSocket {
        constructor(address: string) {
          super(address, { headers: { 'x-forwarded-for': '198.51.100.7' } });
        }
      }
      const workers = new Set<string>();
      // Clients kept open, so the primary's choice by load spreads them, until both workers have some.
      for (let i = 0; i < 20 && workers.size < 2; i++) {
        const client = new SimpleDDP({ endpoint: url, SocketConstructor: Proxied, autoReconnect: false });
        clients.push(client);
        await client.connect();
        workers.add((await client.call<{ worker: string }>('whoami')).worker);
      }
      assert.equal(workers.size, 2, 'connections reached both workers');
      await eventually(() => warnings() > 0, 'the warning');
      // A worker's copy would come through the primary's output a moment later.
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(warnings(), 1, primary.log());
    } finally {
      for (const peer of peers) peer.close();
      await Promise.all(clients.map((c) => c.disconnect().catch(() => undefined)));
      if (primary.child.exitCode === null) await primary.stop('SIGKILL');
      await database.drop();
    }
  });
});

describe('perseid start --workers 2 stopped while a worker runs a job', { skip: needsServices({ 'mongo-java-server': mongo }) }, () => {
  it('puts the run back in the queue, its attempt not counted, before the primary gives up on the worker', async () => {
    const database = freshDatabase(mongo!);
    const primary = await startPerseid(APP, ['--port', '0', '--workers', '2'], { MONGO_URL: database.url });
    const client = new SimpleDDP({ endpoint: `${primary.url.replace(/^http/, 'ws')}/websocket`, SocketConstructor: WebSocket, autoReconnect: false });
    const mongoClient = new MongoClient(database.url);
    try {
      await client.connect();
      const id = await client.call<string>('enqueueEndless');
      const run = () => mongoClient.db(database.dbName).collection<JobRun>('perseid_jobs').findOne({ _id: id });
      await eventually(async () => (await run())?.status === 'running', 'the job to start', 10_000);
      // SIGINT: the workers close at once, giving their jobs the jobs engine's grace (10 s) before aborting them.
      assert.equal(await primary.stop('SIGINT'), 0, primary.log());
      const back = (await run())!;
      assert.deepEqual([back.status, back.attempts, back.attemptLog.map((a) => a.outcome)], ['queued', 0, ['lost']], JSON.stringify(back));
    } finally {
      await client.disconnect().catch(() => undefined);
      if (primary.child.exitCode === null) await primary.stop('SIGKILL');
      await mongoClient.close();
      await database.drop();
    }
  });
});

describe('perseid start on MongoDB, one process', { skip: needsServices({ 'mongo-java-server': mongo }) }, () => {
  it('says it stopped, last, on SIGTERM, SIGINT and SIGHUP', async () => {
    const database = freshDatabase(mongo!);
    try {
      for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
        const server = await startPerseid('dist/test/fixtures/cluster-app.js', ['--port', '0', '--drain-ms', '200'], { MONGO_URL: database.url, PERSEID_LOG_LEVEL: 'info' });
        assert.equal(await server.stop(signal), 0, server.log());
        assert.match(server.log().trim().split('\n').at(-1)!, / INFO {2}\[perseid\] stopped ms=\d+$/, server.log());
      }
    } finally {
      await database.drop();
    }
  });
});

describe('perseid start --workers 1: scrapes that come together', { skip: needsServices({ 'mongo-java-server': mongo }) }, () => {
  let primary: PerseidProcess;
  let database: ReturnType<typeof freshDatabase>;
  before(async () => {
    database = freshDatabase(mongo!);
    primary = await startPerseid(APP, ['--port', '0', '--workers', '1'], { MONGO_URL: database.url, PERSEID_LOG_LEVEL: 'info' });
  });
  after(async () => {
    await primary?.stop('SIGINT');
    await database?.drop();
  });

  it('asks each worker once for the figures of scrapes that come together', async () => {
    const { id, pid } = ((await (await fetch(`${primary.url}/perseid/stats`)).json()) as Stats).workers[0]!;
    const unanswered = () => primary.log().split('\n').filter((line) => line.includes("could not read a worker's APM figures") && line.includes(`worker=${id} `)).length;
    const before = unanswered();
    // A worker that does not answer (stopped) makes each question to it visible: a warning after 5 s.
    process.kill(pid, 'SIGSTOP');
    try {
      const replies = await Promise.all(Array.from({ length: 20 }, () => fetch(`${primary.url}/metrics`)));
      assert.deepEqual(new Set(replies.map((reply) => reply.status)), new Set([200]));
    } finally {
      process.kill(pid, 'SIGCONT');
    }
    assert.equal(unanswered() - before, 1, 'one question to the worker for the 20 scrapes');
  });
});
