/**
 * The jobs engine in one process, over each database (the embedded store and
 * every MongoDB-wire stand-in running): several engines sharing one database
 * and one lease table stand for several processes. Each due run once, queued
 * runs once, retries with backoff, timeouts, no overlap, priorities, a stalled
 * runner refused at its commit, runs left by a dead process retried, history
 * kept and pruned. Real processes are in jobs-cluster.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Database } from '../src/collections/database.js';
import type { Lease, LeaseFactory } from '../src/coordination/lease.js';
import { MemoryLeases } from '../src/coordination/lease-memory.js';
import type { JobError } from '../src/jobs/errors.js';
import { RunHistory, type JobRun } from '../src/jobs/history.js';
import { Jobs, type JobsStartOptions } from '../src/jobs/jobs.js';
import { jobsMetrics, type JobSummary } from '../src/jobs/jobs-metrics.js';
import type { Logger } from '../src/log.js';
import { apm } from '../src/metrics/apm.js';
import { prometheusText } from '../src/metrics/prometheus.js';
import { metrics } from '../src/metrics/registry.js';
import { embeddedTarget, mongoTargets, type DatabaseTarget } from './databases.js';
import { eventually } from './processes.js';

const { targets } = await mongoTargets();
// One target per server (the change source does not matter to jobs). FerretDB on SQLite takes about 200 ms per
// queue read here, too slow for engines polling every 50 ms; the MongoDB driver is covered on mongo-java-server.
const perServer = [embeddedTarget(), ...targets.filter((t, i) => t.server !== 'ferretdb' && targets.findIndex((u) => u.server === t.server) === i)];
if (targets.some((t) => t.server === 'ferretdb')) describe('jobs engine on ferretdb', { skip: 'about 200 ms per queue read on SQLite here; the MongoDB driver runs on mongo-java-server' }, () => undefined);

const ferretdb = targets.find((t) => t.server === 'ferretdb');
// One run, polled slowly: FerretDB refuses keys that mongo-java-server and the embedded store take.
describe('jobs engine on ferretdb: a result it cannot store', { skip: ferretdb ? false : 'FerretDB is not running' }, () => {
  it("records the run as succeeded without the result, instead of trying to write its end again every second", async () => {
    const opened = await ferretdb!.open();
    const jobs = new Jobs(opened.database).define('per-domain', () => ({ 'example.com': 3 }));
    try {
      await jobs.start({ database: opened.database, leaseTtlMs: 3000, pollMs: 200 });
      const run = await settledRun(opened.database, await jobs.enqueue('per-domain'), 10_000);
      assert.deepEqual([run.status, run.result], ['succeeded', undefined]);
    } finally {
      await jobs.stop();
      await opened.cleanup();
    }
  });
});

/** Engines standing for processes: one database, one lease table, a name each. */
class Processes {
  readonly leases = new MemoryLeases();
  readonly engines: Jobs[] = [];
  constructor(readonly database: Database) {}

  async start(jobs: Jobs, holder: string, options: Partial<JobsStartOptions> = {}): Promise<Jobs> {
    // Leases long enough that a starved machine's stalls do not pass for dead runners (takeovers have their own test).
    await jobs.start({ database: this.database, leases: (o) => this.leases.lease(o), holder, leaseTtlMs: 2000, pollMs: 50, ...options });
    this.engines.push(jobs);
    return jobs;
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.engines.splice(0).map((j) => j.stop()));
  }
}

/** A logger keeping its warnings' messages, for the lines a test expects (once, not at every poll). */
function capturingLog(warnings: string[]): Logger {
  const log: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (message, fields) => void warnings.push(`${message} ${JSON.stringify(fields ?? {})}`),
    error: (message, fields) => void warnings.push(`${message} ${JSON.stringify(fields ?? {})}`),
    child: () => log,
  };
  return log;
}

async function runsOf(database: Database, job: string): Promise<JobRun[]> {
  return new RunHistory(database).runs.find({ job }, { sort: { runAt: 1 } }).fetchAsync();
}

async function settledRun(database: Database, id: string, timeoutMs = 8000): Promise<JobRun> {
  const history = new RunHistory(database);
  let run: JobRun | undefined;
  await eventually(async () => ['succeeded', 'failed'].includes((run = await history.runs.findOneAsync({ _id: id }))?.status ?? ''), `run ${id} to finish`, timeoutMs);
  return run!;
}

for (const target of perServer) {
  describe(`jobs engine on ${target.label}`, () => {
    let opened: Awaited<ReturnType<DatabaseTarget['open']>>;
    let processes: Processes;
    before(async () => {
      opened = await target.open();
    });
    after(async () => {
      await processes?.stopAll();
      await opened?.cleanup();
    });
    const fresh = async () => {
      await processes?.stopAll();
      processes = new Processes(opened.database);
      return processes;
    };

    it('runs each due run of a schedule once across three engines', async () => {
      const p = await fresh();
      const seen = new Map<string, string[]>();
      for (const name of ['a', 'b', 'c']) {
        // overlap: a starved machine may still be finishing one run when the next is due (skips have their own test).
        const jobs = new Jobs(opened.database).schedule(
          'tick',
          200,
          (_data, ctx) => {
            const key = ctx.scheduledAt!.toISOString();
            seen.set(key, [...(seen.get(key) ?? []), name]);
          },
          { overlap: true },
        );
        await p.start(jobs, name);
      }
      const writeErrors = () => apm.report().database.operations.filter((o) => o.collection === 'perseid_jobs').reduce((n, o) => n + o.errors, 0);
      const errorsBefore = writeErrors();
      const first = Date.now();
      await sleep(2200);
      // The runs due so far, each given time to finish before the engines stop.
      const cutoff = Date.now();
      const unfinished = async () => (await runsOf(opened.database, 'tick')).filter((r) => r.scheduledAt!.getTime() < cutoff && ['queued', 'running'].includes(r.status));
      await eventually(async () => (await unfinished()).length === 0, 'the due runs to finish', 15000);
      await p.stopAll();
      const runs = (await runsOf(opened.database, 'tick')).filter((r) => r.scheduledAt!.getTime() >= first + 200 && r.scheduledAt!.getTime() < cutoff);
      // About 10 are due; a starved machine delays some past the window, never duplicates them.
      assert.ok(runs.length >= 4, `only ${runs.length} runs in 2 s of a 200 ms schedule`);
      for (const run of runs) {
        assert.equal(run.status, 'succeeded', JSON.stringify(run));
        assert.equal(run.attempts, 1);
        assert.deepEqual(seen.get(run.scheduledAt!.toISOString())?.length, 1, `run ${run._id} ran ${JSON.stringify(seen.get(run.scheduledAt!.toISOString()))}`);
      }
      // Consecutive due times, none missing in between.
      for (let i = 1; i < runs.length; i++) assert.equal(runs[i]!.scheduledAt!.getTime() - runs[i - 1]!.scheduledAt!.getTime(), 200);
      assert.ok(new Set(runs.map((r) => r.runner)).size >= 1);
      // The copies of a due run the other engines write are no database failures: /metrics counted one per run and engine.
      assert.equal(writeErrors() - errorsBefore, 0, 'failed writes to the jobs collection');
    });

    it('runs each of 150 queued jobs once, spread over the engines, in the history with who ran it', async () => {
      const p = await fresh();
      const ran = new Map<number, number>();
      const make = () =>
        new Jobs(opened.database).define('work', (data) => {
          const n = (data as { n: number }).n;
          ran.set(n, (ran.get(n) ?? 0) + 1);
          return { doubled: n * 2 };
        });
      const enqueuer = make();
      await enqueuer.start({ database: opened.database, leases: (o) => p.leases.lease(o), holder: 'web', pollMs: 50 });
      await enqueuer.stop(); // a web process: it enqueues, it never runs
      const ids = await Promise.all(Array.from({ length: 150 }, (_, n) => enqueuer.enqueue('work', { n })));
      for (const name of ['a', 'b', 'c']) await p.start(make(), name);
      await eventually(() => ran.size === 150, '150 jobs to run', 60000);
      const runs = await Promise.all(ids.map((id) => settledRun(opened.database, id)));
      assert.ok([...ran.values()].every((n) => n === 1), 'a job ran twice');
      assert.deepEqual(new Set(runs.map((r) => r.status)), new Set(['succeeded']));
      const byRunner = new Map<string, number>();
      for (const run of runs) byRunner.set(run.runner!, (byRunner.get(run.runner!) ?? 0) + 1);
      assert.ok(!byRunner.has('web'), 'the enqueuer ran jobs');
      assert.ok(byRunner.size >= 2, `all ran on one engine: ${JSON.stringify([...byRunner])}`);
      const one = runs.find((r) => (r.data as { n: number }).n === 7)!;
      assert.deepEqual(one.result, { doubled: 14 });
      assert.equal(one.attemptLog.length, 1);
      assert.equal(one.attemptLog[0]!.outcome, 'succeeded');
      assert.ok(typeof one.durationMs === 'number' && one.durationMs >= 0);
    });

    it('retries a failing job with growing delays, then records the success', async () => {
      const p = await fresh();
      const times: number[] = [];
      const jobs = new Jobs(opened.database).define(
        'flaky',
        () => {
          times.push(Date.now());
          if (times.length < 3) throw new Error(`failure ${times.length}`);
          return 'third time';
        },
        { retries: 2, retryDelayMs: 150 },
      );
      await p.start(jobs, 'a');
      const run = await settledRun(opened.database, await jobs.enqueue('flaky'));
      assert.equal(run.status, 'succeeded');
      assert.equal(run.attempts, 3);
      assert.deepEqual(run.attemptLog.map((a) => [a.outcome, a.error]), [['failed', 'failure 1'], ['failed', 'failure 2'], ['succeeded', undefined]]);
      assert.equal(run.error, undefined, 'a run that succeeded has no error of its own (the dashboard showed failure 2 as its last error)');
      assert.ok(times[1]! - times[0]! >= 150, `first retry after ${times[1]! - times[0]!} ms`);
      assert.ok(times[2]! - times[1]! >= 300, `second retry after ${times[2]! - times[1]!} ms (doubled)`);
    });

    it('records a failure once the retries are spent, and a timeout as a failure', async () => {
      const p = await fresh();
      let aborted: unknown;
      const jobs = new Jobs(opened.database)
        .define('broken', () => Promise.reject(new Error('always')), { retries: 0 })
        .define('stuck', (_d, ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve((aborted = ctx.signal.reason)))), { timeoutMs: 150, retries: 0 });
      await p.start(jobs, 'a');
      const failedRuns = () => jobsMetrics.runsByJob.values().find((s) => s.labels.job === 'broken' && s.labels.outcome === 'failed')?.value ?? 0;
      const failedBefore = failedRuns();
      const broken = await settledRun(opened.database, await jobs.enqueue('broken'));
      assert.equal(broken.status, 'failed');
      assert.equal(broken.error, 'always');
      assert.equal(broken.attempts, 1);
      // Counted by job for an alert on this one: the settled record is written before the count, so wait for it.
      await eventually(() => failedRuns() === failedBefore + 1, "the failure counted under the job's name");
      assert.match(await prometheusText([apm.report()]), /^perseid_job_runs_total\{job="broken",outcome="failed"\} \d+$/m);
      const stuck = await settledRun(opened.database, await jobs.enqueue('stuck'));
      assert.equal(stuck.status, 'failed');
      assert.equal(stuck.error, 'timed out after 150 ms');
      assert.ok(stuck.durationMs! >= 140);
      assert.ok(aborted instanceof Error, 'the job\'s signal was not aborted');
    });

    it("keeps a no-overlap job's lock while a timed-out function that ignores its signal still runs, and logs it once", async () => {
      const p = await fresh();
      let running = 0;
      let most = 0;
      const warnings: string[] = [];
      const log = capturingLog(warnings);
      const jobs = new Jobs(opened.database).define(
        'deaf',
        async () => {
          most = Math.max(most, ++running);
          await sleep(1500); // ignores its signal
          running--;
        },
        { overlap: false, timeoutMs: 100, retries: 1, retryDelayMs: 50 },
      );
      await p.start(jobs, 'a', { log });
      const run = await settledRun(opened.database, await jobs.enqueue('deaf'), 15_000);
      assert.deepEqual([run.status, run.attempts, run.error], ['failed', 2, 'timed out after 100 ms']);
      assert.equal(most, 1, 'the retry ran beside the timed-out attempt still running');
      await eventually(() => running === 0, 'the last copy to return', 5000);
      assert.equal(warnings.filter((w) => w.startsWith("a job's function still runs")).length, 2, warnings.join('\n'));
    });

    it('logs once per process and job that another process defines a job otherwise (a rolling upgrade: a new schedule, a new timeout)', async () => {
      const p = await fresh();
      const warnings: string[] = [];
      const log = capturingLog(warnings);
      const ran: string[] = [];
      const engines: Jobs[] = [];
      for (const [name, every, timeoutMs] of [['old', 300, 1000], ['new', 200, 2000]] as const) {
        const jobs = new Jobs(opened.database)
          .schedule('moved', every, (_d, ctx) => void ran.push(ctx.runId), { overlap: true })
          .define('resize', () => undefined, { timeoutMs });
        engines.push(await p.start(jobs, name, { log }));
      }
      await Promise.all(engines.map((jobs) => jobs.enqueue('resize')));
      const said = (job: string) => warnings.filter((w) => w.startsWith('another process of this app defines this job otherwise') && w.includes(`"job":"${job}"`));
      await eventually(() => said('moved').length === 2 && said('resize').length === 2, 'both processes to say that the definitions differ', 8000);
      await sleep(2500);
      await p.stopAll();
      // One line per process and job, not one per run nor per check.
      assert.deepEqual([said('moved').length, said('resize').length], [2, 2], warnings.join('\n'));
      const differences = (job: string) => said(job).map((w) => /"here":"([^"]*)","there":"([^"]*)"/.exec(w)!.slice(1).join(' / ')).sort();
      assert.deepEqual(differences('moved'), [
        'every 200 ms, timeoutMs 600000, retries 1, retryDelayMs 1000, overlap true / every 300 ms, timeoutMs 600000, retries 1, retryDelayMs 1000, overlap true',
        'every 300 ms, timeoutMs 600000, retries 1, retryDelayMs 1000, overlap true / every 200 ms, timeoutMs 600000, retries 1, retryDelayMs 1000, overlap true',
      ]);
      assert.deepEqual(differences('resize'), [
        'timeoutMs 1000, retries 1, retryDelayMs 1000, overlap true / timeoutMs 2000, retries 1, retryDelayMs 1000, overlap true',
        'timeoutMs 2000, retries 1, retryDelayMs 1000, overlap true / timeoutMs 1000, retries 1, retryDelayMs 1000, overlap true',
      ]);
      assert.equal(new Set(ran).size, ran.length, 'a due run ran twice');
    });

    it('never overlaps runs of a no-overlap schedule: a run due while one runs is skipped', async () => {
      const p = await fresh();
      let running = 0;
      let most = 0;
      for (const name of ['a', 'b']) {
        const jobs = new Jobs(opened.database).schedule('slow', 200, async () => {
          most = Math.max(most, ++running);
          await sleep(450);
          running--;
        });
        await p.start(jobs, name);
      }
      await sleep(2000);
      await p.stopAll();
      const runs = await runsOf(opened.database, 'slow');
      assert.equal(most, 1, 'two runs of a no-overlap job ran at once');
      assert.ok(runs.some((r) => r.status === 'skipped'), 'no run was skipped');
      assert.ok(runs.filter((r) => r.status === 'succeeded').length >= 2);
    });

    it('records a run whose result is too large to keep as succeeded, without the result, and a huge error cut short', async () => {
      const p = await fresh();
      const jobs = new Jobs(opened.database)
        .define('huge', () => 'x'.repeat(2 * 1024 * 1024), { retries: 0 })
        .define('small', () => ({ rows: 3 }))
        .define('verbose', () => {
          throw new Error('y'.repeat(20 * 1024 * 1024));
        }, { retries: 0 });
      await p.start(jobs, 'a');
      const [huge, small, verbose] = [await jobs.enqueue('huge'), await jobs.enqueue('small'), await jobs.enqueue('verbose')];
      const run = await settledRun(opened.database, huge);
      assert.deepEqual([run.status, run.attempts, typeof run.result], ['succeeded', 1, 'undefined']);
      assert.deepEqual((await settledRun(opened.database, small)).result, { rows: 3 });
      const failed = await settledRun(opened.database, verbose);
      assert.equal(failed.status, 'failed');
      assert.ok(failed.error!.length < 5000 && failed.attemptLog[0]!.error!.length < 5000, `an error of ${failed.error!.length} characters kept`);
      assert.match(failed.error!, /^y+\.\.\. \(\d+ more characters\)$/);
    });

    it('records a job that throws a value JSON cannot write (a circular object, a BigInt) as failed', async () => {
      const p = await fresh();
      const circular: Record<string, unknown> = { reason: 'loop' };
      circular.self = circular;
      const jobs = new Jobs(opened.database)
        .define('circular', () => Promise.reject(circular), { retries: 0 })
        .define('bigint', () => {
          throw 10n;
        }, { retries: 0 });
      await p.start(jobs, 'a');
      const [loop, big] = [await jobs.enqueue('circular'), await jobs.enqueue('bigint')];
      // Both stayed running for good: describing the thrown value threw, so the attempt's end was never written.
      const looped = await settledRun(opened.database, loop, 3000);
      assert.equal(looped.status, 'failed');
      assert.match(looped.error!, /loop/);
      assert.deepEqual([(await settledRun(opened.database, big, 3000)).status, (await settledRun(opened.database, big)).error], ['failed', '10n']);
    });

    it("keeps a rare job's last run and error on the dashboard however many runs a frequent job has had since", async () => {
      const p = await fresh();
      const jobs = new Jobs(opened.database)
        .define('nightly', () => {
          throw new Error('disk full');
        }, { retries: 0 })
        .define('chatty', () => undefined);
      await p.start(jobs, 'a');
      await settledRun(opened.database, await jobs.enqueue('nightly'));
      // 600 finished runs of a frequent job since (a job every second for ten minutes), written straight to the history.
      const history = new RunHistory(opened.database);
      for (let i = 0; i < 600; i++) {
        const at = new Date(Date.now() + i);
        await history.runs.insertAsync({ _id: `chatty:${i}`, job: 'chatty', kind: 'queued', priority: 0, runAt: at, status: 'succeeded', attempts: 1, attemptLog: [], createdAt: at, finishedAt: at, durationMs: 1 });
      }
      const { jobs: rows } = (await apm.snapshot()).jobs as { jobs: JobSummary[] };
      // Its row was gone: the summary read the latest 500 runs of every job together.
      const nightly = rows.find((r) => r.job === 'nightly');
      assert.deepEqual([nightly?.failed, nightly?.lastError], [1, 'disk full']);
      assert.ok(rows.find((r) => r.job === 'chatty')!.succeeded > 0);
    });

    it("records a run whose result has keys MongoDB may refuse ('.', a leading '$') as succeeded, without the result", async () => {
      const p = await fresh();
      const jobs = new Jobs(opened.database)
        .define('per-domain', () => ({ hits: { 'example.com': 3 } }))
        .define('query', () => [{ at: { $gt: 1 } }])
        .define('plain', () => ({ hits: [{ domain: 'example.com', n: 3 }] }));
      await p.start(jobs, 'a');
      const [domains, query, plain] = [await jobs.enqueue('per-domain'), await jobs.enqueue('query'), await jobs.enqueue('plain')];
      // FerretDB refused to write such a result, so the end of the run was tried again every second, for good.
      for (const id of [domains, query]) assert.deepEqual(Object.entries(await settledRun(opened.database, id)).filter(([k]) => k === 'status' || k === 'result'), [['status', 'succeeded']]);
      assert.deepEqual((await settledRun(opened.database, plain)).result, { hits: [{ domain: 'example.com', n: 3 }] });
    });

    it('runs higher priorities first', async () => {
      const p = await fresh();
      const order: string[] = [];
      const jobs = new Jobs(opened.database).define('p', (data) => void order.push(data as string));
      const past = Date.now() - 1000;
      await jobs.enqueue('p', 'low', { runAt: past, priority: 1 });
      await jobs.enqueue('p', 'high', { runAt: past + 10, priority: 9 });
      await jobs.enqueue('p', 'later', { runAt: Date.now() + 400, priority: 100 });
      await p.start(jobs, 'a', { concurrency: 1, database: opened.database });
      await eventually(() => order.length === 3, 'three runs', 5000);
      assert.deepEqual(order, ['high', 'low', 'later']);
    });

    it('refuses the result of a runner whose lease was taken over, and retries the run once elsewhere', async () => {
      const p = await fresh();
      // Runner "stalled" believes it still holds its lease (as a paused process would) but renews nothing.
      let stalled = false;
      const stalling: LeaseFactory = (options) => {
        const lease = p.leases.lease(options);
        let token: number | undefined;
        return {
          name: lease.name,
          acquire: async () => (stalled && token !== undefined ? token : (token = await lease.acquire())),
          release: () => lease.release(),
        } satisfies Lease;
      };
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const refusedBefore = jobsMetrics.refused.get();
      const slowRunner = new Jobs(opened.database).define('report', async () => {
        stalled = true;
        await gate;
        return 'from the stalled runner';
      });
      // One attempt at a time: while its run hangs it claims nothing more, as a paused process would not.
      await slowRunner.start({ database: opened.database, leases: stalling, holder: 'stalled', leaseTtlMs: 2000, pollMs: 50, concurrency: 1 });
      p.engines.push(slowRunner);
      const id = await slowRunner.enqueue('report');
      await eventually(async () => (await new RunHistory(opened.database).runs.findOneAsync({ _id: id }))?.status === 'running', 'the stalled runner to claim it');
      const healthy = new Jobs(opened.database).define('report', () => 'from the healthy runner');
      await p.start(healthy, 'healthy');
      const run = await settledRun(opened.database, id, 20000);
      assert.equal(run.status, 'succeeded', JSON.stringify(run));
      assert.equal(run.result, 'from the healthy runner');
      assert.equal(run.runner, 'healthy');
      assert.equal(run.attempts, 2);
      assert.deepEqual(run.attemptLog.map((a) => [a.runner, a.outcome]), [['stalled', 'lost'], ['healthy', 'succeeded']]);
      release();
      await eventually(() => jobsMetrics.refused.get() === refusedBefore + 1, 'the stalled runner\'s result to be refused');
      const after = await new RunHistory(opened.database).runs.findOneAsync({ _id: id });
      assert.equal(after!.result, 'from the healthy runner');
      assert.equal(after!.attemptLog.length, 2);
    });

    it('goes on with a job that blocked the event loop past its lease when no other process took the lease meanwhile', async () => {
      const p = await fresh();
      const jobs = new Jobs(opened.database).define('blocking', async (_data, { signal }) => {
        const until = Date.now() + 700;
        while (Date.now() < until); // longer than the lease: its renewals could not run
        await sleep(200, undefined, { signal });
        return 'done';
      });
      await p.start(jobs, 'a', { leaseTtlMs: 500 });
      const run = await settledRun(opened.database, await jobs.enqueue('blocking'));
      assert.deepEqual([run.status, run.attempts, run.result, run.error], ['succeeded', 1, 'done', undefined]);
      assert.equal(jobs.runner, 'a');
    });

    it('gives a run cut short by its process stopping back to the queue without spending an attempt', async () => {
      const p = await fresh();
      const job = (name: string) => async (_data: unknown, { signal }: { signal: AbortSignal }) => {
        await sleep(name === 'stopping' ? 60_000 : 10, undefined, { signal });
        return name;
      };
      const stopping = await p.start(new Jobs(opened.database).define('report', job('stopping'), { retries: 0 }), 'stopping', { stopGraceMs: 100 });
      const id = await stopping.enqueue('report');
      await eventually(async () => (await stopping.run(id))?.status === 'running', 'the run to start');
      await stopping.stop();
      const back = (await stopping.run(id))!;
      assert.deepEqual([back.status, back.attempts, back.attemptLog.map((a) => a.outcome)], ['queued', 0, ['lost']], JSON.stringify(back));
      await p.start(new Jobs(opened.database).define('report', job('next'), { retries: 0 }), 'next');
      const run = await settledRun(opened.database, id);
      assert.deepEqual([run.status, run.attempts, run.result, run.runner], ['succeeded', 1, 'next', 'next']);
    });

    it('retries runs left running by a process that died, and runs what was queued before a restart', async () => {
      const p = await fresh();
      const history = new RunHistory(opened.database);
      const started = new Date(Date.now() - 60_000);
      await history.runs.insertAsync({
        _id: 'left:1', job: 'left', kind: 'queued', priority: 0, runAt: started, status: 'running', attempts: 1, runner: 'dead-process', token: 1, startedAt: started, attemptLog: [], createdAt: started,
      });
      const ran: string[] = [];
      const before = new Jobs(opened.database).define('left', () => void ran.push('x'));
      const queuedId = await before.enqueue('left', undefined, { runAt: Date.now() + 200 });
      // A new process (a new engine) after the restart:
      await p.start(new Jobs(opened.database).define('left', (_d, ctx) => void ran.push(ctx.runId)), 'after-restart');
      const recovered = await settledRun(opened.database, 'left:1');
      assert.equal(recovered.status, 'succeeded');
      assert.equal(recovered.attempts, 2);
      assert.equal(recovered.attemptLog[0]!.outcome, 'lost');
      assert.match(recovered.attemptLog[0]!.error!, /runner dead-process was lost/);
      assert.equal((await settledRun(opened.database, queuedId)).status, 'succeeded');
      assert.deepEqual(ran.sort(), ['left:1', queuedId].sort());
    });

    it('retries the scheduled run of a dead process once its no-overlap lock expires, rather than skipping it', async () => {
      const p = await fresh();
      const history = new RunHistory(opened.database);
      const due = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000);
      const id = `hourly@${due.toISOString()}`;
      await history.runs.insertAsync({
        _id: id, job: 'hourly', kind: 'scheduled', priority: 0, runAt: due, scheduledAt: due, status: 'running', attempts: 1, runner: 'killed', token: 1, startedAt: due, attemptLog: [], createdAt: due,
      });
      // The killed process's runner lease has lapsed, but the job's lock, renewed by its attempt on another timer, lasts a little longer.
      const lock = p.leases.lease({ name: 'job:hourly', holder: `killed/${id}`, ttlMs: 800 });
      assert.equal(await lock.acquire(), 1);
      const ran: string[] = [];
      await p.start(new Jobs(opened.database).schedule('hourly', '0 * * * *', (_d, ctx) => void ran.push(ctx.runId)), 'survivor');
      let run: JobRun | undefined;
      await eventually(async () => ['succeeded', 'failed', 'skipped'].includes((run = await history.runs.findOneAsync({ _id: id }))?.status ?? ''), 'the run to end', 8000);
      assert.equal(run!.status, 'succeeded', JSON.stringify(run));
      assert.deepEqual(run!.attemptLog.map((a) => [a.runner, a.outcome]), [['killed', 'lost'], ['survivor', 'succeeded']]);
      assert.deepEqual(ran, [id]);
    });

    it('shows schedules, next runs and recent runs on the stats page, and prunes old history', async () => {
      const p = await fresh();
      const jobs = new Jobs(opened.database).schedule('shown', '*/1 * * * * *', () => 'ok');
      // Left by an earlier deployment whose schedule was renamed: no process knows its job, so it stayed queued for good.
      const history = new RunHistory(opened.database);
      const longAgo = new Date(Date.now() - 60_000);
      const leftovers = { _id: `renamed@${longAgo.toISOString()}`, job: 'renamed', kind: 'scheduled' as const, priority: 0, runAt: longAgo, scheduledAt: longAgo, status: 'queued' as const, attempts: 0, attemptLog: [], createdAt: longAgo };
      await history.runs.insertAsync(leftovers);
      // A queued one-off run waits for its job, however long (a web process may run a newer version than the jobs processes).
      await history.runs.insertAsync({ ...leftovers, _id: 'newer:1', job: 'newer', kind: 'queued' });
      await p.start(jobs, 'a', { retentionMs: 500 });
      type Section = { schedules: Array<{ job: string; nextRunAt: string }>; recent: Array<{ job: string }> };
      const section = () => metrics.describeSections().jobs as Section;
      await eventually(() => section().recent.some((r) => r.job === 'shown'), 'a run on the stats page', 5000);
      assert.equal(section().schedules[0]!.job, 'shown');
      assert.ok(Date.parse(section().schedules[0]!.nextRunAt) > Date.now() - 2000);
      const firstId = (await runsOf(opened.database, 'shown'))[0]!._id;
      await eventually(async () => (await new RunHistory(opened.database).runs.findOneAsync({ _id: firstId })) === undefined, 'retention to remove the first run', 5000);
      assert.equal(await history.runs.findOneAsync({ _id: leftovers._id }), undefined);
      assert.equal((await history.runs.findOneAsync({ _id: 'newer:1' }))?.status, 'queued');
    });

    it('refuses bad definitions and unknown jobs with errors that say what to do', async () => {
      const jobs = new Jobs(opened.database).define('known', () => undefined);
      await assert.rejects(jobs.enqueue('unknown'), (e: JobError) => e.code === 'JOB_NOT_DEFINED' && /define it/.test(e.message));
      assert.throws(() => jobs.define('known', () => undefined), (e: JobError) => e.code === 'JOB_ALREADY_DEFINED');
      assert.throws(() => jobs.define('bad name!', () => undefined), (e: JobError) => e.code === 'JOB_BAD_OPTIONS');
      assert.throws(() => jobs.define('x', () => undefined, { retries: -1 }), (e: JobError) => e.code === 'JOB_BAD_OPTIONS' && /retries/.test(e.message));
      assert.throws(() => jobs.schedule('y', 'not cron', () => undefined), (e: JobError) => e.code === 'JOB_BAD_SCHEDULE');
      await assert.rejects(jobs.enqueue('known', {}, { runAt: Number.NaN }), (e: JobError) => e.code === 'JOB_BAD_OPTIONS');
      // Misspelt options were dropped without a word: Intl's timeZone left a Paris schedule in UTC.
      assert.throws(
        () => jobs.schedule('paris', '0 7 * * *', () => undefined, { timeZone: 'Europe/Paris' } as never),
        (e: JobError) => e.code === 'JOB_BAD_OPTIONS' && e.message === `Job 'paris': unknown option "timeZone"; the options are timeoutMs, retries, retryDelayMs, overlap, priority, timezone`,
      );
      assert.throws(() => jobs.define('mail', () => undefined, { timezone: 'UTC', retry: 3 } as never), (e: JobError) => /unknown option "timezone" \(timezone is for scheduled jobs\)/.test(e.message));
      assert.throws(() => jobs.schedule('tz', '0 7 * * *', () => undefined, 'Europe/Paris' as never), (e: JobError) => /options must be an object/.test(e.message));
      assert.deepEqual(jobs.names, ['known']);
      await assert.rejects(jobs.enqueue('known', {}, { delayMs: 60_000 } as never), (e: JobError) => e.code === 'JOB_BAD_OPTIONS' && /unknown enqueue option "delayMs"; the options are runAt, priority/.test(e.message));
    });
  });
}
