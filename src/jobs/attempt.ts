/**
 * One attempt of one claimed run: the no-overlap lock when the job wants one,
 * the job's function with its timeout and abort signal, then the fenced write
 * of the outcome (succeeded, failed, or queued again for a retry with
 * backoff). A runner whose lease was taken over meanwhile is refused at that
 * write, and says so.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { inspect } from 'node:util';
import type { LeaseFactory } from '../coordination/lease.js';
import { refusedKey } from '../data/refused-key.js';
import type { Logger } from '../log.js';
import type { JobDefinition } from './definitions.js';
import { timedOut } from './errors.js';
import type { Claimed, JobRun, RunHistory } from './history.js';
import { jobsMetrics, recordFinished } from './jobs-metrics.js';
import { renewalInterval } from './runner-lease.js';

export interface JobContext {
  /** The job's name. */
  readonly name: string;
  /** The run's id in the history (`name@due time` for a scheduled run). */
  readonly runId: string;
  /** For a scheduled run, the due time it was made for. */
  readonly scheduledAt: Date | undefined;
  /** 1 for the first attempt, 2 for the first retry, ... */
  readonly attempt: number;
  /** This runner's fencing token: the run's outcome is recorded only while it is still the run's current token. */
  readonly token: number;
  /**
   * Aborted when the run times out or this runner learns it lost its lease:
   * stop working and return. A runner that stalls (a paused process) may learn
   * it late, so make writes of your own idempotent, keyed by `runId`.
   */
  readonly signal: AbortSignal;
}

export type JobFunction = (data: unknown, context: JobContext) => unknown;

export interface AttemptDeps {
  history: RunHistory;
  leases: LeaseFactory;
  leaseTtlMs: number;
  log: Logger;
  /** Aborts every attempt claimed under a runner name when that runner's lease is lost. */
  register(holder: string, controller: AbortController): () => void;
  /** Aborted when the process stops: a run whose end could not be written by then is left to another process's sweep. */
  closing: AbortSignal;
}

/** How often the end of a run is written again while the database refuses it. */
const RECORD_RETRY_MS = 1000;

/** Why an attempt's signal was aborted, when it was not the job's own doing. */
class Abort extends Error {}

function abortedBy(signal: AbortSignal): Promise<never> {
  return new Promise((_resolve, reject) => {
    if (signal.aborted) reject(signal.reason as Error);
    else signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
  });
}

/** Longest error a run's record keeps (each attempt's too): a record must stay far below MongoDB's 16 MiB per document. */
const MAX_ERROR_CHARS = 4000;

/** A thrown value that is not an Error: as JSON, or as Node prints it when JSON cannot write it (a circular object, a BigInt). */
function describeValue(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return inspect(value, { depth: 2, breakLength: Infinity });
  }
}

function describeError(error: unknown): string {
  const text = error instanceof Error ? error.message || error.name : typeof error === 'string' ? error : describeValue(error);
  return text.length <= MAX_ERROR_CHARS ? text : `${text.slice(0, MAX_ERROR_CHARS)}... (${text.length - MAX_ERROR_CHARS} more characters)`;
}

/** Runs `claimed` to its end (every outcome goes to the history and the log); throws only when the process stops before the end could be written. */
export async function runAttempt(claimed: Claimed, job: JobDefinition, deps: AttemptDeps): Promise<void> {
  const { run } = claimed;
  const { history, log } = deps;
  const startedAt = new Date();
  const landed = (record: JobRun | undefined) =>
    record?.attemptLog.some((a) => a.runner === claimed.runner && a.outcome !== 'lost' && new Date(a.startedAt).getTime() === startedAt.getTime()) ?? false;
  // A run left `running` under a live runner is never taken over: the write that ends it is tried until the database
  // takes it (a failover, an outage), or until this process stops and gives its runner lease up.
  const recorded = async (write: () => Promise<boolean>): Promise<boolean> => {
    for (let failures = 0; ; failures++) {
      try {
        if (failures === 0) return await write();
        // A write that failed may have landed all the same (the answer was lost): then this one is refused, as a
        // runner taken over would be; the attempt's entry in the run's log tells them apart.
        const done = (await write()) || landed(await history.runs.findOneAsync({ _id: run._id }));
        log.info('recorded the end of a run once the database answered', { job: job.name, run: run._id, tries: failures + 1 });
        return done;
      } catch (error) {
        if (failures === 0) log.warn('could not record the end of a run; trying again until the database answers', { job: job.name, run: run._id, error: describeError(error) });
        if (deps.closing.aborted) throw error;
        await sleep(RECORD_RETRY_MS, undefined, { signal: deps.closing }).catch(() => undefined);
        if (deps.closing.aborted) throw error;
      }
    }
  };
  // A no-overlap job runs one run at a time across every process: its lock is a lease named after the job,
  // held by this attempt (not this process, which may be running another run of the job).
  // Held by this attempt, not by the run: a retry in this process must not take over the lock of an attempt whose
  // function still runs after its timeout.
  const lock = job.overlap ? undefined : deps.leases({ name: `job:${job.name}`, holder: `${claimed.runner}/${run._id}#${run.attempts}`, ttlMs: deps.leaseTtlMs });
  const later = () => new Date(Date.now() + Math.min(1000, deps.leaseTtlMs));
  let locked: number | undefined;
  try {
    locked = await lock?.acquire();
  } catch (thrown) {
    // The lease store went away since this run was claimed (the runner lease's renewal says so in the log): back to the
    // queue until it returns, rather than left running.
    log.debug('run put back in the queue: its no-overlap lock cannot be checked', { job: job.name, run: run._id, error: describeError(thrown) });
    await recorded(() => history.unclaim(claimed, later()));
    return;
  }
  if (lock && locked === undefined) {
    // A due run finding an earlier run still going is skipped. A retry waits instead: the lock may be its own lost
    // attempt's, which outlives that attempt's runner lease by up to a renewal interval (they are renewed apart).
    if (run.kind === 'scheduled' && run.attempts === 1) {
      jobsMetrics.skipped.inc();
      log.info('run skipped: the previous run of this job is still running', { job: job.name, run: run._id });
      await recorded(() => history.finish(claimed, { status: 'skipped', startedAt, now: new Date(), error: 'the previous run of this job was still running' }));
    } else {
      await recorded(() => history.unclaim(claimed, later()));
    }
    return;
  }
  const controller = new AbortController();
  const unregister = deps.register(claimed.runner, controller);
  const timeout = setTimeout(() => controller.abort(new Abort(timedOut(job.timeoutMs))), job.timeoutMs);
  // The lock is renewed like any lease while the run lasts.
  const renewLock = lock && setInterval(() => void lock.acquire().catch(() => undefined), renewalInterval(deps.leaseTtlMs));
  jobsMetrics.started.inc();
  jobsMetrics.running.inc();
  let result: unknown;
  let error: string | undefined;
  const context: JobContext = {
    name: job.name,
    runId: run._id,
    scheduledAt: run.scheduledAt,
    attempt: run.attempts,
    token: claimed.token,
    signal: controller.signal,
  };
  const work = Promise.resolve().then(() => job.fn(run.data, context));
  let returned = false;
  const settled = work.then(
    () => void (returned = true),
    () => void (returned = true),
  );
  try {
    result = await Promise.race([work, abortedBy(controller.signal)]);
  } catch (thrown) {
    error = describeError(thrown);
  } finally {
    clearTimeout(timeout);
    unregister();
    jobsMetrics.running.dec();
  }
  // JavaScript cannot stop a function that ignores its aborted signal: it goes on after its attempt has ended, and a
  // no-overlap job's lock is held (and renewed) until it returns, so no retry nor next due run starts beside it.
  const unlocked = returned
    ? Promise.resolve()
    : outlive(settled, controller.signal, { job: job.name, run: run._id, attempt: run.attempts }, log, deps.closing);
  const releaseLock = async () => {
    await unlocked;
    clearInterval(renewLock);
    await lock?.release().catch(() => undefined);
  };
  const now = new Date();
  if (error !== undefined && deps.closing.aborted) {
    // Cut short because this process is stopping: another process (or this one, restarted) runs it again.
    const back = await recorded(() => history.interrupted(claimed, { startedAt, now, error: error! }));
    await releaseLock();
    if (back) log.info('run put back in the queue: this process stopped before it finished', { job: job.name, run: run._id });
    return;
  }
  let committed: boolean;
  let status: 'succeeded' | 'failed' | 'retrying';
  if (error === undefined) {
    status = 'succeeded';
    const kept = storable(result);
    if (kept.tooLarge !== undefined) {
      log.warn('run succeeded; its result is not kept in the history (too large)', { job: job.name, run: run._id, bytes: kept.tooLarge, limit: MAX_RESULT_BYTES });
    }
    if (kept.badKey !== undefined) {
      log.warn("run succeeded; its result is not kept in the history (a key with '.' or starting with '$', which MongoDB may refuse)", { job: job.name, run: run._id, key: kept.badKey });
    }
    committed = await recorded(() => history.finish(claimed, { status: 'succeeded', startedAt, now, result: kept.value }));
  } else if (run.attempts < job.retries + 1) {
    status = 'retrying';
    const retry = { startedAt, now, error, runAt: new Date(now.getTime() + job.retryDelayMs * 2 ** (run.attempts - 1)) };
    committed = await recorded(() => history.retry(claimed, retry));
  } else {
    status = 'failed';
    committed = await recorded(() => history.finish(claimed, { status: 'failed', startedAt, now, error }));
  }
  void releaseLock();
  const durationMs = now.getTime() - startedAt.getTime();
  if (!committed) {
    jobsMetrics.refused.inc();
    log.warn('result refused: this runner lost its lease and the run was taken over', { job: job.name, run: run._id, runner: claimed.runner, token: claimed.token });
    return;
  }
  recordFinished({ job: job.name, run: run._id, status, attempt: run.attempts, durationMs, error, runner: claimed.runner, finishedAt: now });
  if (status === 'succeeded') log.debug('run succeeded', { job: job.name, run: run._id, attempt: run.attempts, durationMs });
  else log.warn(status === 'retrying' ? 'run failed; it will be retried' : 'run failed', { job: job.name, run: run._id, attempt: run.attempts, error });
}

/** How long a function may take to return once its signal is aborted before the log says it still runs. */
const STILL_RUNNING_MS = 1000;

/**
 * Waits for the function of an attempt that ended without it (timed out, or its runner lost): logs once that it still
 * runs if it has not returned within STILL_RUNNING_MS, and once more when it returns. Resolves when it returns, or
 * when the process stops (its lock then lapses on its own).
 */
function outlive(settled: Promise<void>, signal: AbortSignal, fields: Record<string, unknown>, log: Logger, closing: AbortSignal): Promise<void> {
  const abortedAt = Date.now();
  let warned = false;
  const timer = setTimeout(() => {
    warned = true;
    log.warn("a job's function still runs after its attempt ended: it ignores context.signal; a no-overlap job's next run waits for it", {
      ...fields,
      reason: describeError(signal.reason),
    });
  }, STILL_RUNNING_MS);
  timer.unref();
  void settled.then(() => {
    clearTimeout(timer);
    if (warned) log.info("a job's function that ignored its signal returned", { ...fields, afterAbortMs: Date.now() - abortedAt });
  });
  return Promise.race([settled, abortedBy(closing).catch(() => undefined)]);
}

/**
 * Largest result a history record keeps, as JSON: far below MongoDB's 16 MiB per document (a record over it cannot be
 * written, which left the run `running` for good), and small enough for the stats page and `jobs.runs()` to read.
 */
const MAX_RESULT_BYTES = 1024 * 1024;

/**
 * What a history record can keep of a job's return value: plain data, not functions or class instances the store
 * cannot hold, of at most MAX_RESULT_BYTES as JSON (else nothing, and its size), with keys every database stores
 * (else nothing, and the key).
 */
function storable(value: unknown): { value?: unknown; tooLarge?: number; badKey?: string } {
  if (value === undefined || value === null || typeof value === 'function' || typeof value === 'symbol') return {};
  let json: string | undefined;
  try {
    json = typeof value === 'string' ? value : JSON.stringify(value);
  } catch {
    return {};
  }
  if (json === undefined) return {};
  const bytes = Buffer.byteLength(json);
  if (bytes > MAX_RESULT_BYTES) return { tooLarge: bytes };
  if (typeof value !== 'object') return { value };
  const plain = JSON.parse(json) as unknown;
  // A key the store refuses would leave the run's end unwritable.
  const key = refusedKey(plain);
  return key === undefined ? { value: plain } : { badKey: key };
}
