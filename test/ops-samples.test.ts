/**
 * The Jobs and Autoscaling samples (docs/jobs.md, docs/autoscaling.md), run: the Jobs sample is
 * examples/jobs/app.ts word for word, started as a real process (a queued job
 * runs, the schedules are listed with their next runs); the Autoscaling
 * command runs against a one-server cluster (with a free port for its
 * metrics) and prints its first decision and exports it. Also the command
 * line's refusals: one line saying what to do.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { DDPClient } from '../src/client/node.js';
import { serviceUrl } from '../scripts/services/control.js';
import { freePort } from '../scripts/services/process.js';
import { freshDatabase } from './databases.js';
import { needsServices } from './skips.js';
import { parseFencedBlocks } from './docs-blocks.js';
import { CLI, eventually, exited, startPerseid } from './processes.js';

/** The fenced blocks of a docs page (docs-samples.test.ts checks that each names its file and is it). */
function blocks(page: string, lang: string): string[] {
  return parseFencedBlocks(readFileSync(page, 'utf8'))
    .filter((b) => b.lang === lang)
    .map((b) => b.text);
}

/** Runs `perseid <args>` to its end (several at once: each takes seconds to start on a busy machine). */
function run(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    // A refusal takes seconds; a command that started a server instead of refusing is stopped.
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000 });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => void (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => void (stderr += c.toString()));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

interface JobsStats {
  jobs?: { role: string; schedules: Array<{ job: string; schedule: string; nextRunAt: string }>; recent: Array<{ job: string; status: string }> };
}

describe('the Jobs sample (docs/jobs.md)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'perseid-jobs-sample-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('runs: a queued job runs in the background, the schedules show their next runs', async () => {
    const server = await startPerseid('dist/examples/jobs/app.js', ['--port', '0', '--data-dir', dir]);
    const client = new DDPClient(server.url);
    try {
      await client.connect();
      const id = await client.call<string>('signUp', 'ada@example.com');
      assert.match(id, /^send-email:/);
      const stats = async () => (await (await fetch(`${server.url}/perseid/stats`)).json()) as JobsStats;
      await eventually(async () => (await stats()).jobs?.recent.some((r) => r.job === 'send-email' && r.status === 'succeeded') ?? false, 'the e-mail job to run', 10000);
      const { jobs } = await stats();
      assert.equal(jobs!.role, 'all');
      const daily = jobs!.schedules.find((s) => s.job === 'daily-report')!;
      assert.match(daily.schedule, /Europe\/Paris/);
      // 07:00 in Paris is 05:00 or 06:00 UTC, depending on the season.
      assert.match(daily.nextRunAt, /T0[56]:00:00\.000Z$/);
      assert.equal(Date.parse(jobs!.schedules.find((s) => s.job === 'prune')!.nextRunAt) % 10_000, 0);
      await assert.rejects(client.call('signUp', 42), /signUp\(to: string\)/);
    } finally {
      await client.disconnect();
      await server.stop();
    }
  });
});

const mongo = await serviceUrl('mongo-java-server');
const redis = await serviceUrl('redis');
const skip = needsServices({ 'mongo-java-server': mongo, redis });

describe('the Autoscaling sample (docs/autoscaling.md)', { skip }, () => {
  it('prints its first decision against a one-server cluster and exports it for Prometheus', async () => {
    const [line] = blocks('docs/autoscaling.md', 'sh');
    assert.ok(line?.startsWith('npx perseid autoscale '), line);
    const metricsPort = await freePort();
    const args = line!.trim().replace(/^npx perseid /, '').replace('--metrics-port 9464', `--metrics-port ${metricsPort}`).split(/\s+/);
    const database = freshDatabase(mongo!);
    const env = { MONGO_URL: database.url, REDIS_URL: redis! };
    const port = await freePort();
    const server = await startPerseid('dist/test/fixtures/cluster-app.js', ['--port', String(port), '--public-url', `http://127.0.0.1:${port}`], env);
    const autoscale = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    autoscale.stdout!.on('data', (c: Buffer) => void (out += c.toString()));
    autoscale.stderr!.on('data', (c: Buffer) => void (out += c.toString()));
    try {
      await eventually(() => /scale up to 2 \(below the minimum of 2\)/.test(out), 'the first decision', 15000);
      assert.match(out, /servers 1\/1 {2}per server: sessions 0 /);
      const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      assert.match(metrics, /^perseid_autoscale_desired_instances 2$/m);
    } finally {
      autoscale.kill('SIGTERM');
      assert.equal(await exited(autoscale), 0, out);
      await server.stop();
      await database.drop();
    }
  });
});

describe('perseid start --role and perseid autoscale on the command line', () => {
  it('list their options in --help', async () => {
    const [start, autoscale, overview] = await Promise.all([run(['start', '--help']), run(['autoscale', '--help']), run(['--help'])]);
    assert.match(start.stdout, /--role <web\|jobs\|all>/);
    assert.equal(autoscale.status, 0);
    for (const option of ['--local', '--scale-command', '--kubernetes', '--dry-run', '--rule', '--metrics-port']) assert.ok(autoscale.stdout.includes(option), option);
    assert.match(overview.stdout, /autoscale/);
  });

  it('refuse mistakes in one line that says what to do', async () => {
    const refusals: Array<[string[], NodeJS.ProcessEnv, RegExp]> = [
      [['start', 'dist/examples/tasks/app.js', '--role', 'worker'], {}, /--role must be web, jobs or all \(got worker\)/],
      [['start', 'dist/examples/tasks/app.js', '--role', 'jobs', '--workers', '2'], { MONGO_URL: 'mongodb://127.0.0.1:1/x' }, /--role jobs runs no clients: it needs no --workers/],
      // Accepted before: the web process's enqueued runs stayed queued for good, the jobs process served no one.
      [['start', 'dist/examples/jobs/app.js', '--role', 'web', '--port', '0'], { MONGO_URL: '' }, /--role web needs MONGO_URL: .*Set MONGO_URL, or leave --role at all\.$/m],
      [['start', 'dist/examples/jobs/app.js', '--port', '0'], { MONGO_URL: '', PERSEID_ROLE: 'jobs' }, /--role jobs needs MONGO_URL/],
      // The tasks app defines no jobs: the settings are checked all the same.
      [['start', 'dist/examples/tasks/app.js', '--jobs-concurrency', '0'], {}, /--jobs-concurrency must be an integer from 1 to 1000 \(got 0\)/],
      [['start', 'dist/examples/tasks/app.js'], { PERSEID_JOBS_CONCURRENCY: '0' }, /PERSEID_JOBS_CONCURRENCY must be an integer from 1 to 1000 \(got 0\)/],
      [['start', 'dist/examples/tasks/app.js', '--jobs-poll-ms', '-1'], {}, /--jobs-poll-ms must be an integer from 10 to 3600000 \(got -1\)/],
      [['autoscale', '--min', '1'], { MONGO_URL: 'mongodb://127.0.0.1:1/x' }, /say how to scale: --local <app>/],
      [['autoscale', '--dry-run', '--local', 'app.js'], { MONGO_URL: 'mongodb://127.0.0.1:1/x' }, /choose one of --local, --dry-run/],
      [['autoscale', '--dry-run'], { MONGO_URL: '' }, /set MONGO_URL/],
      [['autoscale', '--dry-run', '--rule', 'sessions:10'], { MONGO_URL: 'mongodb://127.0.0.1:1/x' }, /--rule must be <metric>:<above>:<below>/],
      [['autoscale', '--dry-run', '--rule', 'disk:10:5'], { MONGO_URL: 'mongodb://127.0.0.1:1/x' }, /unknown metric disk/],
      [['autoscale', '--dry-run', '--rule', 'sessions:10:20'], { MONGO_URL: 'mongodb://127.0.0.1:1/x' }, /lower threshold \(20\) must be below/],
      [['autoscale', '--scale-command', 'scale it'], { MONGO_URL: 'mongodb://127.0.0.1:1/x' }, /must contain \{n\}/],
      [['autoscale', '--dry-run', '--min', '5', '--max', '2'], { MONGO_URL: 'mongodb://127.0.0.1:1/x' }, /max must be/],
    ];
    const outs = await Promise.all(refusals.map(([args, env]) => run(args, { REDIS_URL: '', ...env })));
    for (const [i, [args, , message]] of refusals.entries()) {
      const out = outs[i]!;
      assert.equal(out.status, 2, `${args.join(' ')}: ${out.stderr}`);
      assert.match(out.stderr.split('\n')[0]!, message);
      assert.doesNotMatch(out.stderr, /\n\s+at /, 'a stack trace for a user mistake');
    }
    const badUrl = await run(['autoscale', '--dry-run'], { REDIS_URL: '', MONGO_URL: 'notaurl' });
    assert.equal(badUrl.status, 1, badUrl.stderr);
    assert.match(badUrl.stderr, /^perseid autoscale: MONGO_URL is not a valid MongoDB connection string \(Invalid scheme[^\n]*\n$/);
  });
});
