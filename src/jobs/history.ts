/**
 * Jobs' durable state: one record per run, through `Collection`, so the
 * embedded store and MongoDB both keep it. A record is the queue entry while
 * it waits, the claim while it runs, and the history once it is done
 * (status, attempts, duration, error, which process), until retention
 * removes it. Every change is a single-document conditional update, atomic on
 * both drivers: claiming is "still queued", and finishing is "still claimed by
 * me with my fencing token", so a runner whose lease was taken over is refused.
 */
import { Collection } from '../collections/collection.js';
import type { Database } from '../collections/database.js';
import { DuplicateKeyError } from '../data/driver.js';

export const JOBS_COLLECTION = 'perseid_jobs';

export type RunStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'skipped';

export interface AttemptRecord {
  runner: string;
  startedAt: Date;
  finishedAt: Date;
  outcome: 'succeeded' | 'failed' | 'lost';
  error?: string;
}

export interface JobRun {
  /** `name@<due time ISO>` for a scheduled run (one per job and due time), `name:<random id>` for an enqueued one. */
  _id: string;
  job: string;
  kind: 'scheduled' | 'queued';
  data?: unknown;
  /** Higher runs first among those due. */
  priority: number;
  /** When it is due (for a retry: when the retry is due). */
  runAt: Date;
  /** The due time a scheduled run was made for. */
  scheduledAt?: Date;
  /** The job's definition in the process that queued it (see JobDefinition.text). */
  definedAs?: string;
  status: RunStatus;
  attempts: number;
  /** The process running it now, or that ran its last attempt. */
  runner?: string | null;
  /** The runner's fencing token when it claimed the run. */
  token?: number | null;
  startedAt?: Date;
  finishedAt?: Date;
  durationMs?: number;
  error?: string;
  result?: unknown;
  attemptLog: AttemptRecord[];
  createdAt: Date;
}

export interface Claimed {
  run: JobRun;
  runner: string;
  token: number;
}

export class RunHistory {
  readonly runs: Collection<JobRun>;

  constructor(database?: Database | Promise<Database>) {
    this.runs = new Collection<JobRun>(JOBS_COLLECTION, { database });
  }

  async ensureIndexes(): Promise<void> {
    await this.runs.createIndexAsync({ status: 1, runAt: 1 });
    // A job's latest runs, newest first: what the dashboard and perseid top read at every refresh.
    await this.runs.createIndexAsync({ job: 1, createdAt: -1 });
  }

  /** Records a scheduled run as queued; false when it exists already (another process made it first). */
  async addScheduled(job: string, due: Date, priority: number, definedAs: string): Promise<boolean> {
    const { _id, ...run } = newRun(`${job}@${due.toISOString()}`, job, 'scheduled', due, priority, { scheduledAt: due, definedAs });
    try {
      // Not an insert: every other process's copy would fail with a duplicate key, which /metrics and the dashboard
      // count as a failed database operation (one per due run and extra jobs process).
      const { insertedId } = await this.runs.upsertAsync({ _id }, { $setOnInsert: run });
      return insertedId !== undefined;
    } catch (error) {
      // Two upserts at once may still race on the _id.
      if (error instanceof DuplicateKeyError || (error as { code?: unknown }).code === 11000) return false;
      throw error;
    }
  }

  async enqueue(id: string, job: string, data: unknown, runAt: Date, priority: number, definedAs: string): Promise<void> {
    await this.runs.insertAsync(newRun(id, job, 'queued', runAt, priority, data === undefined ? { definedAs } : { data, definedAs }));
  }

  /** Due queued runs of the jobs this process knows, most urgent first. */
  due(now: Date, jobs: string[], limit: number): Promise<JobRun[]> {
    return this.runs.find({ status: 'queued', runAt: { $lte: now }, job: { $in: jobs } }, { sort: { priority: -1, runAt: 1 }, limit }).fetchAsync();
  }

  countDue(now: Date, jobs: string[]): Promise<number> {
    return this.runs.find({ status: 'queued', runAt: { $lte: now }, job: { $in: jobs } }).countAsync();
  }

  /** Takes a queued run for `runner`; undefined when another process took it first. */
  async claim(run: JobRun, runner: string, token: number, now: Date): Promise<Claimed | undefined> {
    const taken = await this.runs.updateAsync(
      { _id: run._id, status: 'queued', attempts: run.attempts },
      { $set: { status: 'running', runner, token, startedAt: now }, $inc: { attempts: 1 } },
    );
    if (taken !== 1) return undefined;
    return { run: { ...run, status: 'running', runner, token, startedAt: now, attempts: run.attempts + 1 }, runner, token };
  }

  /** Gives a claimed run back to the queue without counting the attempt (it could not start: another run of a no-overlap job holds it). */
  async unclaim(claimed: Claimed, runAt: Date): Promise<boolean> {
    return this.fenced(claimed, { $set: { status: 'queued', runAt, runner: null, token: null }, $inc: { attempts: -1 } });
  }

  /** Ends a claimed run; refused (false) unless the run is still claimed by this runner with this token. */
  finish(claimed: Claimed, outcome: { status: 'succeeded' | 'failed' | 'skipped'; startedAt: Date; now: Date; error?: string; result?: unknown }): Promise<boolean> {
    const { status, startedAt, now, error, result } = outcome;
    const set: Record<string, unknown> = { status, finishedAt: now, durationMs: now.getTime() - startedAt.getTime() };
    if (error !== undefined) set.error = error;
    if (result !== undefined) set.result = result;
    const modifier: Record<string, unknown> = { $set: set };
    // An earlier attempt's error (a retry, a takeover) is in attemptLog; the run's own is no longer one.
    if (status === 'succeeded') modifier.$unset = { error: '' };
    if (status !== 'skipped') modifier.$push = { attemptLog: attempt(claimed.runner, startedAt, now, status === 'succeeded' ? 'succeeded' : 'failed', error) };
    return this.fenced(claimed, modifier);
  }

  /** Puts a failed attempt back in the queue, due at `runAt`; refused (false) like `finish`. */
  retry(claimed: Claimed, outcome: { startedAt: Date; now: Date; error: string; runAt: Date }): Promise<boolean> {
    const { startedAt, now, error, runAt } = outcome;
    return this.fenced(claimed, {
      $set: { status: 'queued', runAt, error, runner: claimed.runner, token: null },
      $push: { attemptLog: attempt(claimed.runner, startedAt, now, 'failed', error) },
    });
  }

  /**
   * Gives a run back to the queue, due now, without counting its attempt: the process running it stopped before it
   * finished (a deploy is not the job's failure). Refused (false) like `finish`.
   */
  interrupted(claimed: Claimed, outcome: { startedAt: Date; now: Date; error: string }): Promise<boolean> {
    const { startedAt, now, error } = outcome;
    return this.fenced(claimed, {
      $set: { status: 'queued', runAt: now, error, runner: null, token: null },
      $inc: { attempts: -1 },
      $push: { attemptLog: attempt(claimed.runner, startedAt, now, 'lost', error) },
    });
  }

  /** Runs claimed by other processes, to check whether their runners are still alive. */
  running(exceptRunner: string): Promise<JobRun[]> {
    return this.runs.find({ status: 'running', runner: { $ne: exceptRunner } }).fetchAsync();
  }

  /**
   * A run whose runner was lost (its lease taken over): back to the queue when
   * attempts remain, else failed. Conditional on the lost runner's token, so a
   * run that runner finished meanwhile is left alone.
   */
  async recoverLost(run: JobRun, maxAttempts: number, now: Date, error: string): Promise<'requeued' | 'failed' | undefined> {
    const lost = attempt(run.runner ?? 'unknown', run.startedAt ?? now, now, 'lost', error);
    const selector = { _id: run._id, status: 'running', runner: run.runner, token: run.token };
    if (run.attempts < maxAttempts) {
      const n = await this.runs.updateAsync(selector, { $set: { status: 'queued', runAt: now, error, token: null }, $push: { attemptLog: lost } });
      return n === 1 ? 'requeued' : undefined;
    }
    const durationMs = now.getTime() - (run.startedAt ?? now).getTime();
    const n = await this.runs.updateAsync(selector, { $set: { status: 'failed', finishedAt: now, durationMs, error, token: null }, $push: { attemptLog: lost } });
    return n === 1 ? 'failed' : undefined;
  }

  /**
   * Removes finished runs that ended before `before`, and scheduled runs still queued since a due time before it (their
   * schedule was renamed or removed, so no process takes them); resolves with how many.
   */
  prune(before: Date): Promise<number> {
    return this.runs.removeAsync({
      $or: [
        { status: { $in: ['succeeded', 'failed', 'skipped'] }, finishedAt: { $lt: before } },
        { status: 'queued', kind: 'scheduled', runAt: { $lt: before } },
      ],
    });
  }

  /** The definition of `job` in a process that queued a run of it since `since` and defines it otherwise than `definedAs`, if any. */
  async otherDefinition(job: string, definedAs: string, since: Date): Promise<string | undefined> {
    const run = await this.runs.findOneAsync({ job, createdAt: { $gte: since }, definedAs: { $exists: true, $ne: definedAs } });
    return run?.definedAs;
  }

  /** The latest runs, newest first (of one job, or of all). */
  recent(job: string | undefined, limit: number): Promise<JobRun[]> {
    return this.runs.find(job === undefined ? {} : { job }, { sort: { createdAt: -1 }, limit }).fetchAsync();
  }

  /** The latest runs of each of `jobs`, newest first: a rare job keeps its own however often the others run. */
  async latestOfEach(jobs: string[], limit: number): Promise<JobRun[]> {
    return (await Promise.all(jobs.map((job) => this.recent(job, limit)))).flat();
  }

  private async fenced(claimed: Claimed, modifier: Record<string, unknown>): Promise<boolean> {
    const n = await this.runs.updateAsync({ _id: claimed.run._id, status: 'running', runner: claimed.runner, token: claimed.token }, modifier);
    return n === 1;
  }
}

function newRun(_id: string, job: string, kind: JobRun['kind'], runAt: Date, priority: number, extra: Partial<JobRun>): JobRun {
  return { _id, job, kind, priority, runAt, status: 'queued', attempts: 0, attemptLog: [], createdAt: new Date(), ...extra };
}

function attempt(runner: string, startedAt: Date, finishedAt: Date, outcome: AttemptRecord['outcome'], error?: string): AttemptRecord {
  return error === undefined ? { runner, startedAt, finishedAt, outcome } : { runner, startedAt, finishedAt, outcome, error };
}
