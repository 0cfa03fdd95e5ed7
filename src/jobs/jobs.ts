/**
 * `server.jobs`: what an app defines (scheduled jobs, queued job handlers)
 * and enqueues, in every process of the app whatever its role; and the
 * engine that runs them, started only in processes whose role includes jobs.
 *
 *   server.jobs.schedule('digest', '0 8 * * *', sendDigest, { timezone: 'Europe/Paris' });
 *   server.jobs.define('resize', resizeImage, { retries: 3 });
 *   await server.jobs.enqueue('resize', { file }, { priority: 5 });
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Database } from '../collections/database.js';
import { MemoryLeases } from '../coordination/lease-memory.js';
import type { LeaseFactory } from '../coordination/lease.js';
import { Random } from '../ddp/random.js';
import { createLogger, type Logger } from '../log.js';
import type { JobFunction } from './attempt.js';
import { checkOptionNames, defineJob, type JobDefinition, type JobOptions, type ScheduleOptions } from './definitions.js';
import { JobErrors } from './errors.js';
import { RunHistory, type JobRun } from './history.js';
import { hideJobs, hideJobsOnDashboard, showJobs, showJobsOnDashboard } from './jobs-metrics.js';
import { parseSchedule } from './schedule.js';
import { Scheduler } from './scheduler.js';

/** How long stopping waits for running attempts before aborting them, unless told (see `stopGraceMs`). */
export const STOP_GRACE_MS = 10_000;

export interface EnqueueOptions {
  /** When it may run (default now). */
  runAt?: Date | number;
  /** Higher runs first among due runs (default 0). */
  priority?: number;
}

export interface JobsStartOptions {
  /** Where the queue and history live (default: the default database). */
  database?: Database | Promise<Database>;
  /**
   * Leases across the processes of the app: Redis or the database for a
   * cluster; default leases in this process's memory (one process only).
   */
  leases?: LeaseFactory;
  /** This process's name as a runner (default host-pid-random). */
  holder?: string;
  /** A runner silent this long is taken for dead and its runs retried elsewhere (default 30000 ms). */
  leaseTtlMs?: number;
  /** How often the queue is read (default 1000 ms; an enqueue in this process is seen at once). */
  pollMs?: number;
  /** Attempts run at once by this process (default 4). */
  concurrency?: number;
  /** How long finished runs stay in the history (default 7 days). */
  retentionMs?: number;
  /** Shown on the stats page (`all`, `jobs`). */
  role?: string;
  /** Longest `stop()` waits for running attempts before aborting them (default 10000 ms). */
  stopGraceMs?: number;
  log?: Logger;
}

export class Jobs {
  private readonly definitions = new Map<string, JobDefinition>();
  private scheduler: Scheduler | undefined;
  private history: RunHistory | undefined;
  private stopGraceMs = STOP_GRACE_MS;
  /** Whether this process shows the jobs read-only (showWithoutRunning). */
  private showing = false;

  /** `database`: where the queue and history live (default: the default database, as collections use). */
  constructor(private database?: Database | Promise<Database>) {}

  /** Defines a job that runs when enqueued. */
  define(name: string, fn: JobFunction, options: JobOptions = {}): this {
    return this.add(defineJob(name, fn, options, undefined));
  }

  /**
   * Defines a job that runs on a schedule: a cron expression (5 fields, or 6
   * with seconds first; UTC unless `options.timezone`) or an interval in ms.
   * Each due run happens once across every process of the app.
   */
  schedule(name: string, when: string | number, fn: JobFunction, options: ScheduleOptions = {}): this {
    const { timezone, ...rest } = checkOptionNames(name, options, true);
    return this.add(defineJob(name, fn, rest, parseSchedule(when, timezone)));
  }

  /** Queues a run of a defined job; resolves with its id in the history. Works in any process, whatever its role. */
  async enqueue(name: string, data?: unknown, options: EnqueueOptions = {}): Promise<string> {
    const def = this.definitions.get(name);
    if (!def) throw JobErrors.notDefined({ name: String(name) });
    // A misspelt option ({ delayMs }) was dropped without a word: the run went at once.
    const unknown = Object.keys(options ?? {}).find((key) => key !== 'runAt' && key !== 'priority');
    if (unknown !== undefined) throw JobErrors.badOptions({ name, problem: `unknown enqueue option ${JSON.stringify(unknown)}; the options are runAt, priority` });
    const runAt = options.runAt === undefined ? new Date() : new Date(options.runAt);
    if (Number.isNaN(runAt.getTime())) throw JobErrors.badOptions({ name, problem: 'runAt must be a Date or a time in ms' });
    const priority = options.priority ?? 0;
    if (typeof priority !== 'number' || !Number.isFinite(priority)) throw JobErrors.badOptions({ name, problem: 'priority must be a number' });
    const id = `${name}:${Random.id()}`;
    await this.store().enqueue(id, name, data, runAt, priority, def.text);
    if (runAt.getTime() <= Date.now()) this.scheduler?.kick();
    return id;
  }

  /** The latest runs (of one job, or of all), newest first, from the durable history. */
  runs(job?: string, limit = 50): Promise<JobRun[]> {
    return this.store().recent(job, limit);
  }

  /** The run with this id, or undefined once retention removed it. */
  run(id: string): Promise<JobRun | undefined> {
    return this.store().runs.findOneAsync({ _id: id });
  }

  /** The names of the jobs defined so far. */
  get names(): string[] {
    return [...this.definitions.keys()];
  }

  /** Whether this process runs jobs (started, not stopped). */
  get started(): boolean {
    return this.scheduler !== undefined;
  }

  /** This process's name as a runner, while it runs jobs. */
  get runner(): string | undefined {
    return this.scheduler?.holder;
  }

  /** Starts running jobs in this process. Definitions may still be added before; define them all first. */
  async start(options: JobsStartOptions = {}): Promise<void> {
    if (this.scheduler) return;
    const log = options.log ?? createLogger('jobs');
    if (options.database && options.database !== this.database) {
      this.database = options.database;
      this.history = undefined;
    }
    const holder = options.holder ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
    const leases = options.leases ?? ((table) => table.lease.bind(table))(new MemoryLeases());
    this.stopGraceMs = options.stopGraceMs ?? STOP_GRACE_MS;
    const scheduler = new Scheduler(this.definitions, {
      history: this.store(),
      leases,
      holder,
      leaseTtlMs: options.leaseTtlMs ?? 30_000,
      pollMs: options.pollMs ?? 1000,
      concurrency: options.concurrency ?? 4,
      retentionMs: options.retentionMs ?? 7 * 86_400_000,
      log,
    });
    this.scheduler = scheduler;
    try {
      await scheduler.start();
    } catch (error) {
      this.scheduler = undefined;
      throw error;
    }
    showJobs(() => ({ role: options.role ?? 'all', runner: scheduler.holder, schedules: scheduler.schedules() }));
    showJobsOnDashboard((limit) => this.store().latestOfEach(this.names, limit), () => scheduler.schedules(), holder);
    log.info('running jobs', { runner: holder, jobs: this.definitions.size, schedules: scheduler.schedules().length });
  }

  /**
   * Shows the app's jobs on this process's dashboard and in `perseid top` without running them (a web process): the
   * figures a jobs process shows, read from the history every process shares, each schedule's next run computed here.
   * Runs are counted on /metrics only by the process that runs them.
   */
  showWithoutRunning(database?: Database | Promise<Database>): void {
    if (this.scheduler || this.definitions.size === 0) return;
    if (database && database !== this.database) {
      this.database = database;
      this.history = undefined;
    }
    this.showing = true;
    const schedules = () =>
      [...this.definitions.values()].flatMap((d) => (d.schedule ? [{ job: d.name, nextRunAt: d.schedule.next(new Date())?.toISOString() }] : []));
    showJobsOnDashboard((limit) => this.store().latestOfEach(this.names, limit), schedules, undefined);
  }

  /** Stops running jobs here: waits for running attempts (see stopGraceMs), then gives the runner lease up. */
  async stop(): Promise<void> {
    if (this.showing) {
      this.showing = false;
      hideJobsOnDashboard();
    }
    const scheduler = this.scheduler;
    if (!scheduler) return;
    this.scheduler = undefined;
    hideJobs();
    hideJobsOnDashboard();
    await scheduler.stop(this.stopGraceMs);
  }

  private add(def: JobDefinition): this {
    if (this.definitions.has(def.name)) throw JobErrors.alreadyDefined({ name: def.name });
    if (this.scheduler && def.schedule) throw JobErrors.badOptions({ name: def.name, problem: 'define scheduled jobs before the jobs engine starts' });
    this.definitions.set(def.name, def);
    return this;
  }

  private store(): RunHistory {
    return (this.history ??= new RunHistory(this.database));
  }
}
