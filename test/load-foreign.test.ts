/**
 * `perseid load` against a DDP server that is not Perseid: a small one written
 * here with `ws`, as a Meteor server answers, that also drops connections
 * mid-subscription and leaves methods unanswered; and scenarios that await
 * what never settles, or kill their generator process. Every run must still
 * end on time, with the figures of what it did.
 */
import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { WebSocketServer } from 'ws';
import { compareReports, compareText } from '../src/load/report/compare.js';
import { htmlReport } from '../src/load/report/html.js';
import type { LoadReport } from '../src/load/report/model.js';
import { summaryText } from '../src/load/report/summary.js';
import { runScenario } from '../src/load/run-scenario.js';

/**
 * Answers connect, ping, methods and subscriptions as Meteor does, except:
 * method `hang` is never answered, and subscription `dropping` sends one
 * document and then closes the connection before it is ready.
 */
async function meteorLikeServer(): Promise<{ url: string; close(): Promise<void> }> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((resolve) => server.once('listening', resolve));
  server.on('connection', (ws) => {
    const send = (message: Record<string, unknown>) => ws.send(JSON.stringify(message));
    ws.on('message', (data) => {
      const m = JSON.parse(String(data)) as { msg: string; id?: string; name?: string; method?: string };
      if (m.msg === 'connect') send({ msg: 'connected', session: 'a' });
      else if (m.msg === 'ping') send({ msg: 'pong', ...(m.id ? { id: m.id } : {}) });
      else if (m.msg === 'method' && m.method !== 'hang') {
        send({ msg: 'result', id: m.id, result: 'ok' });
        send({ msg: 'updated', methods: [m.id] });
      } else if (m.msg === 'sub' && m.name === 'dropping') {
        send({ msg: 'added', collection: 'items', id: 'x', fields: { a: 1 } });
        setTimeout(() => ws.close(), 20);
      } else if (m.msg === 'sub') {
        send({ msg: 'ready', subs: [m.id] });
      } else if (m.msg === 'unsub') send({ msg: 'nosub', id: m.id });
    });
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      for (const ws of server.clients) ws.terminate();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** `perseid load` with these arguments, as a user runs it. */
function load(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['dist/src/cli/main.js', 'load', ...args], { timeout: 30000 }, (error, stdout, stderr) =>
      resolve({ status: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** Fails instead of hanging when a run does not end. */
function within<T>(ms: number, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`the run did not end within ${ms} ms`)), ms)));
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

describe('perseid load against a DDP server that is not Perseid', () => {
  let server: Awaited<ReturnType<typeof meteorLikeServer>>;
  let dir: string;
  before(async () => {
    server = await meteorLikeServer();
    dir = mkdtempSync(join(tmpdir(), 'perseid-load-foreign-'));
  });
  after(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('ends on time when a scenario awaits what never settles: its users are counted as stopped', async () => {
    const script = join(dir, 'never.mjs');
    writeFileSync(script, `export default async function (client, ctx) { await client.call('fast'); if (ctx.vu % 2 === 0) await new Promise(() => {}); }\n`);
    const started = Date.now();
    const report = await within(15000, runScenario({ url: server.url, scenario: script, client: 'lean', phases: [{ duration: 0.4, arrivalRate: 10 }], graceSeconds: 0.5 }));
    assert.deepEqual({ ...report.users, maxActive: 0 }, { planned: 4, started: 4, completed: 2, failed: 0, aborted: 2, maxActive: 0 });
    // The deadline (0.3 s of arrivals and 0.5 s of grace), then at most 5 s for stopped users to end.
    assert.ok(Date.now() - started < 8000, `${Date.now() - started} ms`);
  });

  it('says in the HTML report, as in the summary, that an interrupted run\'s figures cover only part of it', async () => {
    const report = await runScenario({ url: server.url, scenario: 's6', phases: [{ duration: 10, arrivalRate: 2 }], signal: AbortSignal.timeout(600) });
    assert.equal(report.interrupted, true);
    assert.match(htmlReport(report), /<td>duration<\/td><td>\d+\.\d s \(interrupted: the figures cover only this part of the run\)<\/td>/);
    assert.match(summaryText(report), /lean client {2}\d+\.\d s \(interrupted: the figures cover only this part of the run\)$/m);
  });

  it('--compare says when either run was cut short, and leaves out the figures that depend on its length', async () => {
    const whole = await runScenario({ url: server.url, scenario: 's6', phases: [{ duration: 1, arrivalRate: 4 }], params: { hold: '0.1' } });
    const cut = await runScenario({ url: server.url, scenario: 's6', phases: [{ duration: 1, arrivalRate: 4 }], params: { hold: '0.1' }, signal: AbortSignal.timeout(400) });
    const lost: LoadReport = { ...whole, lostGenerators: ['generator process 2 exited'] };
    const cases: Array<[LoadReport, LoadReport, RegExp]> = [
      [whole, cut, /^differs: figures: whole in the baseline, interrupted after 0\.\d s in this run$/m],
      [cut, whole, /^differs: figures: interrupted after 0\.\d s in the baseline, whole in this run$/m],
      [lost, whole, /^differs: figures: 1 generator process lost in the baseline, whole in this run$/m],
    ];
    for (const [baseline, current, text] of cases) {
      const comparison = compareReports(current, baseline);
      assert.match(compareText(comparison, { percent: 10, floorMs: 1 }), text);
      assert.ok(comparison.leftOut.includes('operations/s'), JSON.stringify(comparison.leftOut));
      assert.ok(!comparison.changes.some((c) => c.figure === 'operations/s'));
    }
    assert.deepEqual(compareReports(whole, whole).differences, []);
  });

  it('says why every user fails against a server that refuses the WebSocket at /websocket (Meteor with DISABLE_WEBSOCKETS), with either client', async () => {
    // A WebSocket at SockJS's path only: the upgrade at /websocket is refused, as Meteor with DISABLE_WEBSOCKETS refuses it.
    const sockjsOnly = new WebSocketServer({ host: '127.0.0.1', port: 0, path: '/sockjs/websocket' });
    await once(sockjsOnly, 'listening');
    try {
      for (const client of ['lean', 'full'] as const) {
        const report = await runScenario({ url: `http://127.0.0.1:${(sockjsOnly.address() as AddressInfo).port}`, scenario: 's6', client, phases: [{ duration: 0.2, arrivalRate: 10 }] });
        assert.deepEqual(report.errors, { 'upgrade refused': 2 }, client);
        assert.match(summaryText(report), /^upgrade refused: the server did not take a WebSocket at the URL's \/websocket\. perseid load speaks DDP over a plain WebSocket, as Meteor and Perseid serve it at \/websocket \(not with DISABLE_WEBSOCKETS set, which leaves SockJS only\); check the URL, or the server\.$/m);
      }
    } finally {
      await new Promise((resolve) => sockjsOnly.close(resolve));
    }
  });

  it('fails the full client\'s waits when the server closes the connection, and after --timeout-ms when it never answers', async () => {
    const script = join(dir, 'full.mjs');
    writeFileSync(
      script,
      `export const options = { client: 'full' };
export default async function (client, ctx) {
  if (ctx.vu === 0) await ctx.measure('subscribe', () => client.subscribe('dropping'));
  else await ctx.measure('hang', () => client.call('hang'));
}\n`,
    );
    const started = Date.now();
    const report = await within(15000, runScenario({ url: server.url, scenario: script, phases: [{ duration: 0.2, arrivalRate: 10 }], timeoutMs: 1000, graceSeconds: 30 }));
    assert.deepEqual({ ...report.users, maxActive: 0 }, { planned: 2, started: 2, completed: 0, failed: 2, aborted: 0, maxActive: 0 });
    assert.deepEqual(report.errors, { 'connection closed by the server': 1, timeout: 1 });
    assert.ok(Date.now() - started < 5000, `${Date.now() - started} ms: the grace of 30 s was not waited for`);
  });

  it('with --processes, reports the figures of the processes left when one dies mid-run, says so, and exits 1', async () => {
    const script = join(dir, 'dies.mjs');
    writeFileSync(script, `export default async function (client, ctx) { await ctx.measure('fast', () => client.call('fast')); await ctx.sleep(300); if (ctx.vu === 3) process.exit(3); }\n`);
    const json = join(dir, 'dies.json');
    const out = await load([script, '--url', server.url, '--client', 'lean', '--rate', '10', '--duration', '0.8', '--processes', '2', '--json', json]);
    assert.equal(out.status, 1, out.stderr);
    assert.doesNotMatch(out.stderr, /\n\s+at /, 'no stack trace');
    assert.match(out.stdout, /^warning: generator process 2 exited \(status 3\) \d+\.\d s into the run, before reporting: the figures of its (\d+ users so far \(\d+ done, 0 errors\) |users )are missing$/m);
    const report = JSON.parse(readFileSync(json, 'utf8')) as LoadReport;
    assert.equal(report.lostGenerators?.length, 1);
    // Process 1's users (0, 2, 4, 6) are measured; every user of the run is planned.
    assert.deepEqual({ ...report.users, maxActive: 0 }, { planned: 8, started: 4, completed: 4, failed: 0, aborted: 0, maxActive: 0 });
    assert.equal(report.measures.fast!.count, 4);
    assert.match(out.stdout, /^users {6}4 started of 8, /m);
  });

  it('with --processes, says in one line when every generator process died, with no stack trace', async () => {
    const script = join(dir, 'all-die.mjs');
    writeFileSync(script, `export default async function () { process.exit(4); }\n`);
    const out = await load([script, '--url', server.url, '--client', 'lean', '--rate', '10', '--duration', '0.4', '--processes', '2']);
    assert.notEqual(out.status, 0);
    assert.match(out.stderr, /every generator process exited before reporting \(generator process 1 exited \(status 4\)/);
    assert.doesNotMatch(out.stderr, /\n\s+at /, 'no stack trace');
  });

  it('with --processes, ends on time when a scenario blocks a generator process\'s event loop: that process is killed and named, also on quitting at once', async () => {
    const script = join(dir, 'blocks.mjs');
    writeFileSync(script, `export default async function (client, ctx) { await client.call('fast'); await ctx.sleep(100); if (ctx.vu === 1) for (;;); }\n`);
    const started = Date.now();
    const out = await load([script, '--url', server.url, '--client', 'lean', '--rate', '10', '--duration', '0.4', '--grace', '0.5', '--processes', '2']);
    assert.equal(out.status, 1, out.stderr);
    assert.match(out.stdout, /^warning: generator process 2 was killed, not having reported by the end of the run and its grace \(a scenario blocking its event loop\?\), \d+\.\d s into the run, before reporting: the figures of its (users|\d+ users so far \(\d+ done, \d+ errors\)) are missing$/m);
    assert.match(out.stdout, /^users {6}2 started of 4, 2 completed, /m);
    // Its start, the arrivals and grace (0.8 s), 5 s for stopped users, 3 s more for the report.
    assert.ok(Date.now() - started < 20000, `${Date.now() - started} ms`);

    // Quitting at once (a second Ctrl-C) kills that process too, rather than leaving it spinning.
    const run = spawn(process.execPath, ['dist/src/cli/main.js', 'load', script, '--url', server.url, '--client', 'lean', '--rate', '10', '--duration', '30', '--processes', '2'], { stdio: 'ignore' });
    // ps exits 1 while there is none yet.
    const generators = () => spawnSync('ps', ['-o', 'pid=', '--ppid', String(run.pid)], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean).map(Number);
    const pids = await within(10000, (async () => {
      while (generators().length < 2) await new Promise((resolve) => setTimeout(resolve, 100));
      return generators();
    })());
    await new Promise((resolve) => setTimeout(resolve, 2500)); // past the start: process 2 is in its loop
    const exited = once(run, 'exit');
    run.kill('SIGINT');
    await new Promise((resolve) => setTimeout(resolve, 300));
    run.kill('SIGINT');
    await within(5000, exited);
    const running = (pid: number) => spawnSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' }).stdout.trim().replace(/^Z.*/, '') !== '';
    // Killed as its parent quits: gone a moment later.
    for (let i = 0; i < 20 && pids.some(running); i++) await new Promise((resolve) => setTimeout(resolve, 100));
    const alive = pids.filter(running);
    for (const pid of alive) process.kill(pid, 'SIGKILL');
    assert.deepEqual(alive, [], 'no generator process left');
  });
});
