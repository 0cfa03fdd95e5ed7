/** `perseid load`: measurements, arrival shapes, counts against a real server, reports, bounds and the command line. */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { chromium } from 'playwright-core';
import pubCycleApp from '../bench/apps/pub-cycle.js';
import tasksApp from '../examples/tasks/app.js';
import { setDefaultDatabase } from '../src/collections/database.js';
import { Measurements } from '../src/load/measurements.js';
import { compareReports, compareText, verdict, type Change, type Judging } from '../src/load/report/compare.js';
import { htmlReport } from '../src/load/report/html.js';
import type { LoadReport } from '../src/load/report/model.js';
import { fitted, planRun, runScenario } from '../src/load/run-scenario.js';
import { arrivalTimes } from '../src/load/runner.js';
import { metrics } from '../src/metrics/registry.js';
import { startServer, type TestServer } from './helpers.js';
import { needs } from './skips.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));

/** Judged on percent alone: the in-process runs' latencies are a few ms, their doubling may be under the floor. */
const EVERY_MS: Judging = { percent: 10, floorMs: 0 };
describe('load measurements', () => {
  it('computes percentiles right on known inputs', () => {
    const m = new Measurements(0);
    for (let i = 1; i <= 1000; i++) m.record('op', i, 0);
    const s = m.summaries().op!;
    assert.equal(s.count, 1000);
    const near = (actual: number, expected: number) => assert.ok(Math.abs(actual - expected) <= expected * 0.002, `${actual} ≈ ${expected}`);
    near(s.p50, 500);
    near(s.p95, 950);
    near(s.p99, 990);
    near(s.max, 1000);
    near(s.mean, 500.5);
  });

  it('never puts a percentile above the largest timing (a bucket\'s top is up to 0.1 % above its values)', () => {
    const m = new Measurements(0);
    for (const value of [100.9, 201.6, 201.6]) m.record('op', value, 0);
    const s = m.summaries().op!;
    assert.equal(s.max, 201.6);
    assert.deepEqual([s.p50, s.p95, s.p99], [201.6, 201.6, 201.6]);
  });

  it('spreads arrivals evenly, and along a ramp', () => {
    assert.deepEqual(arrivalTimes([{ duration: 2, arrivalRate: 5 }]).map(Math.round), [0, 200, 400, 600, 800, 1000, 1200, 1400, 1600, 1800]);
    const ramp = arrivalTimes([{ duration: 10, arrivalRate: 0, rampTo: 10 }]);
    assert.equal(ramp.length, 50);
    const gaps = ramp.slice(1).map((t, i) => t - ramp[i]!);
    assert.ok(gaps[0]! > gaps.at(-1)! * 5, 'arrivals get denser as the rate ramps up');
    const two = arrivalTimes([{ duration: 1, arrivalRate: 2 }, { duration: 1, arrivalRate: 4 }]);
    assert.deepEqual(two.map(Math.round), [0, 500, 1000, 1250, 1500, 1750]);
  });

  it('fits a scenario whose default is phases to --duration alone (s1 ran its 60 s whatever --duration said)', async () => {
    assert.deepEqual(fitted([{ duration: 60, arrivalRate: 4 }], 20), [{ duration: 20, arrivalRate: 4 }]);
    assert.deepEqual(fitted([{ duration: 10, arrivalRate: 1 }, { duration: 30, arrivalRate: 2, rampTo: 4 }], 20), [
      { duration: 5, arrivalRate: 1 },
      { duration: 15, arrivalRate: 2, rampTo: 4 },
    ]);
    const plan = await planRun({ url: 'http://127.0.0.1:1', scenario: 's1', duration: 20 });
    assert.equal((plan.shape.phases ?? []).reduce((sum, phase) => sum + phase.duration, 0), 20);
  });
});

describe('perseid load against real servers', () => {
  let tasks: TestServer;
  let items: TestServer;
  let dir: string;
  before(async () => {
    tasks = await startServer((server) => tasksApp(server));
    items = await startServer((server) => pubCycleApp(server));
    dir = mkdtempSync(join(tmpdir(), 'perseid-load-'));
  });
  after(async () => {
    await tasks.close();
    await items.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs S1: every operation counted, messages in equal to what the server sent', async () => {
    const sent = metrics.counter('perseid_messages_sent_total', '').get();
    const report = await runScenario({ url: tasks.url, scenario: 's1', phases: [{ duration: 1, arrivalRate: 20 }], params: { tasks: '3' } });
    assert.deepEqual(report.users, { planned: 20, started: 20, completed: 20, failed: 0, aborted: 0, maxActive: report.users.maxActive });
    assert.equal(report.measures.subscribe!.count, 20);
    assert.equal(report.measures.insertTask!.count, 60);
    assert.equal(report.measures.removeTask!.count, 60);
    assert.equal(report.measures.removeAllTasks!.count, 40);
    assert.equal(report.measures.connect!.count, 20);
    assert.equal(report.traffic.messagesOut, 20 * (1 + 1 + 2 + 3 + 3));
    assert.equal(report.traffic.messagesIn, metrics.counter('perseid_messages_sent_total', '').get() - sent);
    assert.deepEqual(report.errors, {});
    assert.ok(report.rates.operationsPerSecond > 0);
    assert.equal(report.timeline.reduce((n, p) => n + p.completed, 0), 20);
  });

  it('runs S2 (calls and checks fetchTasks), S3 (pub-cycle, fixed concurrency) and S6 (hold idle)', async () => {
    const s2 = await runScenario({ url: tasks.url, scenario: 's2', phases: [{ duration: 1, arrivalRate: 5 }], params: { tasks: '2' } });
    assert.equal(s2.users.completed, 5);
    assert.equal(s2.measures.insertTask!.count, 10);
    const s3 = await runScenario({ url: items.url, scenario: 's3', concurrency: 3, duration: 1.5, params: { size: '20kb' } });
    assert.equal(s3.users.failed, 0);
    assert.ok(s3.measures.subscribe!.count >= 6, `${s3.measures.subscribe!.count} subscriptions in 1.5 s by 3 users`);
    assert.ok(s3.rates.subscriptionsPerMinute! > 0);
    // 20 documents + ready per subscription, plus connected.
    assert.equal(s3.traffic.messagesIn, s3.measures.subscribe!.count * 22);
    const s6 = await runScenario({ url: tasks.url, scenario: 's6', phases: [{ duration: 0.5, arrivalRate: 20 }], params: { hold: '0.5' } });
    assert.equal(s6.users.completed, 10);
    assert.equal(s6.counts['connections held'], 10);
  });

  it('runs a script with the full client, waiting on collection state', async () => {
    const script = join(dir, 'script.mjs');
    writeFileSync(
      script,
      `export const options = { client: 'full', description: 'insert and watch' };
export default async function (client, ctx) {
  await client.subscribe('fetchTasks');
  const id = await ctx.measure('insert', () => client.call('insertTask', { description: 'scripted', sessionId: 'script-' + ctx.vu }));
  if (!client.collection('taskCollection').findOne(id)) throw new Error('inserted task not in the local collection');
  await ctx.measure('remove', () => client.expect('removed', 'taskCollection', id, () => client.call('removeTask', { taskId: id })));
}\n`,
    );
    const report = await runScenario({ url: tasks.url, scenario: script, phases: [{ duration: 1, arrivalRate: 4 }] });
    assert.equal(report.client, 'full');
    assert.equal(report.users.completed, 4, JSON.stringify(report.errors));
    assert.equal(report.measures.insert!.count, 4);
    // connect, sub, two methods and disconnect per user: the full client's traffic counted as the lean one's is.
    assert.equal(report.traffic.messagesOut, 4 * 5);
    assert.ok(report.traffic.bytesOut > 4 * 5 * 20, `${report.traffic.bytesOut} bytes out`);
    assert.ok(report.traffic.bytesIn > 0 && report.traffic.messagesIn >= 4 * 7, `${report.traffic.messagesIn} messages in`);
  });

  it('stops users still running at the deadline, and refuses runs larger than --max-users', async () => {
    const script = join(dir, 'forever.mjs');
    writeFileSync(script, `export default async function (client, ctx) { while (true) await ctx.sleep(50); }\n`);
    const started = Date.now();
    const report = await runScenario({ url: tasks.url, scenario: script, client: 'lean', phases: [{ duration: 0.2, arrivalRate: 10 }], graceSeconds: 0.5 });
    assert.equal(report.users.aborted, 2);
    assert.ok(Date.now() - started < 5000);
    await assert.rejects(runScenario({ url: tasks.url, scenario: 's1', phases: [{ duration: 10, arrivalRate: 10 }], maxUsers: 50 }), /more than --max-users 50/);
  });

  it('spreads users over several servers given with --url, in turn', async () => {
    const second = await startServer((server) => tasksApp(server));
    const upgrades = new Map<string, number>();
    const counters = [tasks, second].map((t) => {
      const count = () => void upgrades.set(t.url, (upgrades.get(t.url) ?? 0) + 1);
      t.server.httpServer.on('upgrade', count);
      return () => t.server.httpServer.off('upgrade', count);
    });
    try {
      const report = await runScenario({ url: [tasks.url, second.url], scenario: 's1', phases: [{ duration: 1, arrivalRate: 6 }], params: { tasks: '1' } });
      assert.equal(report.users.completed, 6, JSON.stringify(report.errors));
      assert.deepEqual([upgrades.get(tasks.url), upgrades.get(second.url)], [3, 3]);
      assert.equal(report.url, `${tasks.url} ${second.url}`);
    } finally {
      for (const stop of counters) stop();
      await second.close();
      setDefaultDatabase(tasks.database); // the example apps' collections follow the default database
    }
  });

  it('survives a server that goes away mid-run: its users fail, counted by kind', async () => {
    const doomed = await startServer((server) => tasksApp(server));
    const closing = new Promise((resolve) => setTimeout(resolve, 700)).then(() => doomed.close());
    const report = await runScenario({ url: doomed.url, scenario: 's1', phases: [{ duration: 2, arrivalRate: 10 }], thinkMs: 100, timeoutMs: 3000 });
    await closing;
    setDefaultDatabase(tasks.database);
    assert.ok(report.users.failed > 0, JSON.stringify(report.users));
    assert.equal(report.users.started, report.users.completed + report.users.failed + report.users.aborted);
    assert.ok(Object.keys(report.errors).length > 0 && Object.keys(report.errors).every((kind) => /closed|connect|timeout/.test(kind)), JSON.stringify(report.errors));
  });

  it('counts failures by kind when the server refuses what a scenario asks', async () => {
    const report = await runScenario({ url: tasks.url, scenario: 's3', concurrency: 2, duration: 0.5, params: { size: '20kb' } });
    assert.equal(report.users.completed, 0);
    // The reason names what the app lacks: a bare 'ddp 404' left a newcomer guessing.
    assert.ok((report.errors["ddp 404 Subscription 'items' not found"] ?? 0) >= 2, JSON.stringify(report.errors));
  });

  it('writes an HTML report whose charts render in headless Chromium', { skip: CHROMIUM ? false : needs('Chromium', 'apt-get install chromium (or set CHROMIUM_PATH)') }, async () => {
    const report = await runScenario({ url: tasks.url, scenario: 's1', phases: [{ duration: 2, arrivalRate: 5 }], params: { tasks: '2' }, serverPid: process.pid });
    const file = join(dir, 'report.html');
    writeFileSync(file, htmlReport(report));
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'] });
    try {
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`file://${file}`);
      await page.waitForFunction(() => (window as unknown as { charts?: unknown[] }).charts?.length === 4);
      assert.equal(await page.locator('canvas').count(), 4);
      assert.deepEqual(errors, []);
      // The latency chart: connect included, one colour per measure (its p99 dashed), a legend to read without hovering, axes from zero.
      const latency = await page.evaluate(() => {
        type Plot = { series: Array<{ label: string; _stroke?: unknown; dash?: number[] }>; scales: Record<string, { min: number }> };
        const plot = (window as unknown as { charts: Plot[] }).charts[0]!;
        const strokes = [...document.querySelectorAll('#latency .u-legend .u-marker')].map((m) => getComputedStyle(m).borderColor);
        return { labels: plot.series.slice(1).map((s) => s.label), strokes, minX: plot.scales.x!.min, minY: plot.scales.y!.min, legend: document.querySelector('#latency .u-legend')?.textContent ?? '' };
      });
      assert.ok(latency.labels.includes('connect p50') && latency.labels.includes('connect p99'), latency.labels.join());
      const p50Colours = latency.labels.flatMap((label, i) => (label.endsWith(' p50') ? [latency.strokes[i]] : []));
      assert.equal(new Set(p50Colours).size, p50Colours.length, `each measure its own colour: ${p50Colours.join(' ')}`);
      assert.deepEqual(latency.labels.map((label, i) => label.endsWith(' p99') && latency.strokes[i] === latency.strokes[i - 1]).filter(Boolean).length, latency.labels.length / 2);
      assert.equal(latency.minX, 0);
      assert.equal(latency.minY, 0);
      assert.match(latency.legend, /connect p50/);
      assert.doesNotMatch(latency.legend, /--/, 'no hover-only values in the legend');
      assert.match((await page.textContent('h1')) ?? '', /perseid load · s1/);
    } finally {
      await browser.close();
    }
  });

  it('compares with an earlier report: what got worse or better, each row read as it stands', async () => {
    const report = await runScenario({ url: tasks.url, scenario: 's1', phases: [{ duration: 1, arrivalRate: 5 }], params: { tasks: '2' } });
    const same = compareReports(report, report);
    assert.deepEqual(same.differences, []);
    assert.ok(same.changes.length > 0 && same.changes.every((c) => c.worsePercent === 0 && c.changePercent === 0));
    // As from runs long enough for their percentiles to count (10 timings beyond the p99).
    report.measures.insertTask!.count = report.measures.removeTask!.count = 1000;
    const baseline: LoadReport = JSON.parse(JSON.stringify(report)) as LoadReport;
    baseline.measures.insertTask!.p99 = report.measures.insertTask!.p99 / 2; // this run's p99 is twice the baseline's
    baseline.measures.insertTask!.p50 = report.measures.insertTask!.p50 * 2; // and its p50 half
    baseline.rates.operationsPerSecond = report.rates.operationsPerSecond * 2;
    const { changes } = compareReports(report, baseline);
    const change = (figure: string) => changes.find((c) => c.figure === figure)!;
    assert.ok(change('insertTask p99 ms').worsePercent > 90);
    assert.equal(Math.round(change('insertTask p99 ms').changePercent), 100);
    assert.equal(Math.round(change('insertTask p50 ms').changePercent), -50);
    assert.ok(change('operations/s').worsePercent > 40);
    const rows = compareText({ differences: [], changes, leftOut: [] }, EVERY_MS).split('\n');
    assert.match(rows.find((r) => r.startsWith('insertTask p99 ms'))!, /\+100\.0 %\s+WORSE$/);
    assert.match(rows.find((r) => r.startsWith('insertTask p50 ms'))!, /-50\.0 %\s+better$/);
    assert.match(rows.find((r) => r.startsWith('operations/s'))!, /-50\.0 %\s+WORSE$/);
    assert.match(rows.find((r) => r.startsWith('removeTask p50 ms'))!, /0\.0 %$/, 'no verdict within the threshold');
    assert.ok(rows.every((r) => !/worse/.test(r) || r.startsWith('compared')), rows.join('\n'));
  });

  it('does not mark a latency that moved less than the floor in ms, whatever its percent', () => {
    const change = (baseline: number, current: number): Change => ({ figure: 'call p50 ms', baseline, current, changePercent: 0, worsePercent: ((current - baseline) / baseline) * 100, latency: true });
    // Two identical runs of a fast server: 0.38 ms, then 0.43.
    assert.equal(verdict(change(0.38, 0.43), { percent: 10, floorMs: 1 }), 'under 1 ms');
    assert.equal(verdict(change(0.38, 0.43), EVERY_MS), 'WORSE');
    assert.equal(verdict(change(2, 3), { percent: 10, floorMs: 1 }), 'WORSE');
    assert.equal(verdict(change(3, 2), { percent: 10, floorMs: 1 }), 'better');
    // Not a latency: the floor does not apply.
    assert.equal(verdict({ ...change(0.38, 0.43), figure: 'server CPU ms / operation', latency: undefined }, { percent: 10, floorMs: 1 }), 'WORSE');
  });

  it('does not mark the change of a percentile with fewer than 10 timings beyond it: two runs of one load differ that much by chance', async () => {
    const report = await runScenario({ url: tasks.url, scenario: 's1', phases: [{ duration: 1, arrivalRate: 5 }], params: { tasks: '4' } });
    assert.equal(report.measures.insertTask!.count, 20);
    const baseline: LoadReport = JSON.parse(JSON.stringify(report)) as LoadReport;
    for (const p of ['p50', 'p95', 'p99'] as const) baseline.measures.insertTask![p] = report.measures.insertTask![p] / 2;
    const comparison = compareReports(report, baseline);
    const rows = compareText(comparison, EVERY_MS).split('\n');
    // 10 timings beyond the p50 of 20: marked; 1 beyond the p95, none beyond the p99: noise.
    assert.match(rows.find((r) => r.startsWith('insertTask p50 ms'))!, /\+100\.0 %\s+WORSE$/);
    assert.match(rows.find((r) => r.startsWith('insertTask p95 ms'))!, /\+100\.0 %\s+few timings$/);
    assert.match(rows.find((r) => r.startsWith('insertTask p99 ms'))!, /\+100\.0 %\s+few timings$/);
    assert.deepEqual(
      comparison.changes.filter((c) => verdict(c, EVERY_MS) === 'WORSE').map((c) => c.figure),
      ['insertTask p50 ms'],
    );
  });

  it('compares runs of different lengths on what a length does not sway, and refuses runs of different loads', async () => {
    const report = await runScenario({ url: tasks.url, scenario: 's1', phases: [{ duration: 1, arrivalRate: 5 }], params: { tasks: '2' }, serverPid: process.pid });
    const copy = (change: (r: LoadReport) => void) => {
      const r = JSON.parse(JSON.stringify(report)) as LoadReport;
      change(r);
      return r;
    };
    const shorter = compareReports(report, copy((r) => (r.shape.phases = [{ duration: 0.5, arrivalRate: 5 }])));
    assert.deepEqual(shorter.differences, [{ what: 'duration', baseline: '0.5 s', current: '1 s', blocks: false }]);
    assert.deepEqual(shorter.leftOut, ['operations/s', 'subscriptions/min', 'server peak RSS MB']);
    assert.ok(shorter.changes.some((c) => c.figure === 'insertTask p50 ms') && shorter.changes.some((c) => c.figure === 'failed users %'));
    assert.ok(shorter.changes.some((c) => c.figure === 'server CPU ms / operation'));
    const text = compareText(shorter, EVERY_MS).split('\n');
    assert.equal(text[0], 'differs: duration: 0.5 s in the baseline, 1 s in this run');
    assert.match(text[1]!, /^left out: operations\/s, subscriptions\/min, server peak RSS MB/);
    for (const [change, what] of [
      [(r: LoadReport) => (r.shape.phases = [{ duration: 1, arrivalRate: 8 }]), /^differs: load: 1 s at 8\/s in the baseline, 1 s at 5\/s in this run$/],
      [(r: LoadReport) => (r.scenario.name = 's2'), /^differs: scenario: s2 in the baseline, s1 in this run$/],
      [(r: LoadReport) => (r.client = 'full'), /^differs: client: full in the baseline, lean in this run$/],
      [(r: LoadReport) => (r.params.tasks = '5'), /^differs: param tasks: 5 in the baseline, 2 in this run$/],
      [(r: LoadReport) => (r.shape = { concurrency: 5, duration: 1, thinkMs: 0 }), /^differs: load: 5 users at once for 1 s in the baseline, 1 s at 5\/s in this run$/],
    ] as const) {
      const comparison = compareReports(report, copy(change));
      assert.deepEqual(comparison.changes, []);
      const lines = compareText(comparison, EVERY_MS).split('\n');
      assert.match(lines[0]!, what);
      assert.equal(lines.at(-1), 'not compared: the runs put different loads on the server');
    }
  });

  describe('the command line', () => {
    // Asynchronous: the servers under test live in this process and must keep answering.
    const cli = (args: string[]) =>
      new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
        execFile(process.execPath, ['dist/src/cli/main.js', 'load', ...args], { timeout: 60000 }, (error, stdout, stderr) =>
          resolve({ status: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
        );
      });

    it('prints its help, with the built-in scenarios', async () => {
      const out = await cli(['--help']);
      assert.equal(out.status, 0);
      assert.match(out.stdout, /Usage: perseid load/);
      for (const name of ['s1', 's2', 's3', 's4', 's6']) assert.match(out.stdout, new RegExp(`\\n  ${name}  `));
    });

    it('exits 2 with a clear message on bad options and unreachable servers', async () => {
      const cases: Array<[string[], RegExp]> = [
        [['--url', tasks.url], /Missing the scenario/],
        [['s1'], /Missing --url/],
        [['s1', '--url', 'ftp://x'], /--url must be an http\(s\) or ws\(s\) URL/],
        [['s1', '--url', tasks.url, '--client', 'thin'], /--client must be lean or full/],
        [['s1', '--url', tasks.url, '--phase', '10'], /--phase must be/],
        [['s1', '--url', tasks.url, '--rate', '5', '--concurrency', '2'], /cannot be combined/],
        [['s1', '--url', tasks.url, '--rate', 'fast'], /--rate must be a number/],
        [['s1', '--url', tasks.url, '--rate', '-1'], /--rate must be a number from 0\.001 to 100000 \(got -1\)/],
        [['s1', 's2', '--url', tasks.url], /One scenario at a time \(got s1 and s2\)/],
        [['nope', '--url', tasks.url], /cannot load the scenario 'nope'/],
        [['s1', '--url', 'http://127.0.0.1:9'], /cannot reach http:\/\/127\.0\.0\.1:9/],
        [['s1', '--url', tasks.url, '--rate', '100', '--duration', '100', '--max-users', '10'], /more than --max-users 10/],
        [['s1', '--url', tasks.url, '--processes', '0'], /--processes must be/],
        [['s1', '--url', tasks.url, '--rate', '1', '--duration', '0.5', '--iterations', '3'], /--iterations counts the runs of each user at a fixed concurrency, and s1 runs by arrivals/],
        // Refused before the run (it used to end minutes later in a stack trace, the figures lost).
        [['s1', '--url', tasks.url, '--rate', '1', '--duration', '0.5', '--json', join(dir, 'missing', 'r.json')], /^perseid load: cannot write --json \S+r\.json: no folder \S+missing$/m],
        [['s1', '--url', tasks.url, '--rate', '1', '--duration', '0.5', '--html', dir], /--html \S+ is a folder: give a file name/],
      ];
      for (const [args, message] of cases) {
        const out = await cli(args);
        assert.equal(out.status, 2, `${args.join(' ')}: ${out.stderr}`);
        assert.match(out.stderr, message);
      }
    });

    it('spreads users over generator processes with --processes and merges what they measure', async () => {
      const json = join(dir, 'processes.json');
      const sent = metrics.counter('perseid_messages_sent_total', '').get();
      const out = await cli(['s1', '--url', tasks.url, '--rate', '12', '--duration', '1', '--param', 'tasks=2', '--processes', '3', '--json', json]);
      assert.equal(out.status, 0, out.stderr);
      const report = JSON.parse(readFileSync(json, 'utf8')) as LoadReport;
      assert.equal(report.shape.processes, 3);
      assert.deepEqual({ ...report.users, maxActive: 0 }, { planned: 12, started: 12, completed: 12, failed: 0, aborted: 0, maxActive: 0 });
      // Every user's operations, from whichever process ran it, are in the merged histograms.
      assert.equal(report.measures.connect!.count, 12);
      assert.equal(report.measures.insertTask!.count, 24);
      assert.equal(report.timeline.reduce((n, p) => n + p.completed, 0), 12);
      assert.equal(report.traffic.messagesIn, metrics.counter('perseid_messages_sent_total', '').get() - sent);
      assert.ok(report.generatorCpuSeconds > 0);
      assert.match(out.stderr, /\(3 processes\)/);
    });

    it('stops on Ctrl-C with a report of what was measured until then, in one process or several, then ends as interrupted', async () => {
      for (const more of [[], ['--processes', '2']]) {
        const json = join(dir, `interrupted${more.length}.json`);
        const args = ['dist/src/cli/main.js', 'load', 's1', '--url', tasks.url, '--rate', '5', '--duration', '60', '--think-ms', '100', '--param', 'tasks=2', '--json', json, ...more];
        const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '';
        child.stdout.on('data', (data: Buffer) => (stdout += data.toString()));
        try {
          await new Promise((resolve) => setTimeout(resolve, 3500)); // users running
          child.kill('SIGINT');
          const ended = await Promise.race([once(child, 'exit').then(([, signal]) => signal as string), new Promise((resolve) => setTimeout(resolve, 15000, 'still running'))]);
          assert.equal(ended, 'SIGINT', stdout);
          assert.match(stdout, /lean client {2}\d+\.\d s \(interrupted: the figures cover only this part of the run\)\n/);
          const report = JSON.parse(readFileSync(json, 'utf8')) as LoadReport;
          assert.equal(report.interrupted, true);
          assert.ok(report.users.started > 0 && report.users.started < 300 && report.seconds < 10, JSON.stringify(report.users));
          assert.equal(report.measures.connect!.count, report.users.started);
        } finally {
          child.kill('SIGKILL');
        }
      }
    });

    it('writes JSON, and exits 1 when --compare finds a figure worse than the threshold', async () => {
      const json = join(dir, 'cli.json');
      const first = await cli(['s1', '--url', tasks.url, '--rate', '5', '--duration', '1', '--param', 'tasks=4', '--json', json]);
      assert.equal(first.status, 0, first.stderr);
      assert.match(first.stdout, /insertTask/);
      const report = JSON.parse(readFileSync(json, 'utf8')) as LoadReport;
      assert.equal(report.users.completed, 5);
      report.measures.insertTask!.p99 = 0.001;
      writeFileSync(json, JSON.stringify(report));
      // The p99 of 20 inserts is their slowest: its change is not marked and does not fail the run.
      const noise = await cli(['s1', '--url', tasks.url, '--rate', '5', '--duration', '1', '--param', 'tasks=4', '--compare', json, '--threshold', '10']);
      assert.match(noise.stdout, /insertTask p99 ms.*few timings$/m);
      report.measures.insertTask!.p50 = 0.001;
      writeFileSync(json, JSON.stringify(report));
      const second = await cli(['s1', '--url', tasks.url, '--rate', '5', '--duration', '1', '--param', 'tasks=4', '--compare', json, '--threshold', '10', '--threshold-ms', '0']);
      assert.equal(second.status, 1);
      assert.match(second.stdout, /insertTask p50 ms.*WORSE/);
      // The same change, under a floor of a second: not counted.
      const floored = await cli(['s1', '--url', tasks.url, '--rate', '5', '--duration', '1', '--param', 'tasks=4', '--compare', json, '--threshold', '10', '--threshold-ms', '1000']);
      assert.equal(floored.status, 0, floored.stdout);
      assert.match(floored.stdout, /insertTask p50 ms.*under 1000 ms$/m);
    });

    it('with --compare, says how the runs differ: a different duration before the table, a different load refused before running', async () => {
      const json = join(dir, 'baseline.json');
      const first = await cli(['s1', '--url', tasks.url, '--rate', '5', '--duration', '0.6', '--param', 'tasks=1', '--json', json]);
      assert.equal(first.status, 0, first.stderr);
      const longer = await cli(['s1', '--url', tasks.url, '--rate', '5', '--duration', '1', '--param', 'tasks=1', '--compare', json]);
      const comparison = longer.stdout.slice(longer.stdout.indexOf('differs:'));
      assert.match(comparison, /^differs: duration: 0\.6 s in the baseline, 1 s in this run\nleft out: operations\/s, subscriptions\/min \(they depend on a run's length\)\ncompared with the baseline/);
      assert.doesNotMatch(comparison, /^operations\/s/m);
      assert.match(comparison, /^insertTask p50 ms /m);
      const started = Date.now();
      const faster = await cli(['s1', '--url', tasks.url, '--rate', '50', '--duration', '0.6', '--param', 'tasks=1', '--compare', json]);
      assert.equal(faster.status, 2);
      assert.equal(faster.stdout, '', 'refused before running');
      assert.match(faster.stderr.split('\n')[0]!, /--compare \S+baseline\.json ran a different load \(load: 0\.6 s at 5\/s in the baseline, 0\.6 s at 50\/s in this run\): run with the baseline's settings, or leave out --compare$/);
      assert.ok(Date.now() - started < 10000);
      writeFileSync(join(dir, 'other.json'), '{"hello": 1}');
      const other = await cli(['s1', '--url', tasks.url, '--compare', join(dir, 'other.json')]);
      assert.equal(other.status, 2);
      assert.match(other.stderr, /other\.json is not a report written by perseid load --json/);
    });
  });
});
