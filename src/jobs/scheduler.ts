/**
 * The engine of a process that runs jobs: one timer for the next due
 * scheduled run, a poll of the queue (every `pollMs`, and at once after an
 * enqueue or a finished run), a sweep for runs whose runner was lost, and
 * retention. It works only while it holds its runner lease (runner-lease.ts).
 *
 * A scheduled run is first written to the queue under its identity
 * (job, due time) by every process that sees it due, where all but the first
 * write are refused as duplicates; then it is claimed like any queued run, by
 * exactly one process. So each due run happens once, whichever process's
 * clock is ahead.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { LeaseFactory } from '../coordination/lease.js';
import { FailureLog } from '../failure-log.js';
import type { Logger } from '../log.js';
import { runAttempt } from './attempt.js';
import type { JobDefinition } from './definitions.js';
import { runnerLost } from './errors.js';
import type { JobRun, RunHistory } from './history.js';
import { jobsMetrics } from './jobs-metrics.js';
import { RunnerLease, STOP_WAIT_MS } from './runner-lease.js';

export interface SchedulerOptions {
  history: RunHistory;
  leases: LeaseFactory;
  /** This process's name as a runner (unique per process). */
  holder: string;
  leaseTtlMs: number;
  pollMs: number;
  /** Attempts this process runs at once. */
  concurrency: number;
  /** How long finished runs stay in the history. */
  retentionMs: number;
  log: Logger;
}

/** Due runs a late timer queues at most, per schedule (beyond that the process was away, not late). */
const MAX_CATCH_UP = 20;

/** Most urgent first; equals in random order, so processes polling together do not all reach for the same run. */
function spread(runs: JobRun[]): JobRun[] {
  return runs
    .map((run) => ({ run, key: Math.random() }))
    .sort((a, b) => b.run.priority - a.run.priority || a.key - b.key)
    .map(({ run }) => run);
}

export class Scheduler {
  private readonly runner: RunnerLease;
  private readonly nextDue = new Map<string, Date>();
  private readonly active = new Set<Promise<void>>();
  private readonly controllers = new Map<string, Set<AbortController>>();
  private readonly timers: NodeJS.Timeout[] = [];
  /** Jobs and other processes' definitions of them already logged (checkDefinitions). */
  private readonly otherDefinitions = new Set<string>();
  private scheduleTimer: NodeJS.Timeout | undefined;
  private draining: Promise<void> | undefined;
  private drainAgain = false;
  private sweeping: Promise<void> | undefined;
  private lastSweepTick = Date.now();
  private stopped = false;
  /** Aborted once `stop` has waited its grace: attempts still writing their end give up. */
  private readonly closing = new AbortController();
  /** A database or lease store that is down fails every poll and sweep: one line when it starts, one when it ends. */
  private readonly queueFailures: FailureLog;
  private readonly sweepFailures: FailureLog;

  constructor(
    private readonly definitions: ReadonlyMap<string, JobDefinition>,
    private readonly options: SchedulerOptions,
  ) {
    this.queueFailures = new FailureLog(options.log, 'job queue read');
    this.sweepFailures = new FailureLog(options.log, 'check for lost job runners');
    this.runner = new RunnerLease(options.leases, options.holder, options.leaseTtlMs, options.log, (holder) => this.lost(holder));
  }

  /** This process's runner name now (it changes after a takeover), or undefined while it has no lease. */
  get holder(): string | undefined {
    return this.runner.held?.holder;
  }

  /** When each scheduled job runs next, as this process computes it. */
  schedules(): Array<{ job: string; schedule: string; nextRunAt?: string }> {
    return [...this.definitions.values()]
      .filter((d) => d.schedule)
      .map((d) => ({ job: d.name, schedule: d.schedule!.text, nextRunAt: this.nextDue.get(d.name)?.toISOString() }));
  }

  async start(): Promise<void> {
    const { options } = this;
    const { history, pollMs, leaseTtlMs, retentionMs } = options;
    await history.ensureIndexes();
    await this.runner.start();
    this.armSchedules();
    const every = (ms: number, work: () => void) => {
      const timer = setInterval(work, ms);
      timer.unref();
      this.timers.push(timer);
    };
    every(pollMs, () => {
      this.kick();
      void history.countDue(new Date(), this.names()).then((n) => jobsMetrics.queued.set(n), () => undefined);
    });
    const sweepEvery = Math.max(50, Math.floor(leaseTtlMs / 2));
    this.lastSweepTick = Date.now();
    every(sweepEvery, () => {
      // A tick this late means this process stalled (a GC pause, a starved CPU, a paused VM); whatever stalled it
      // may have stalled the other runners too, whose renewals are now due: judge them at the next tick instead.
      const late = Date.now() - this.lastSweepTick - sweepEvery;
      this.lastSweepTick = Date.now();
      if (late > leaseTtlMs / 3) options.log.debug('this process was stalled; not judging other runners this round', { lateMs: late });
      else void this.sweep();
    });
    every(sweepEvery, () => {
      // The runs queued since the previous check, and a little before (a slow database, a late timer).
      void this.checkDefinitions(new Date(Date.now() - 3 * sweepEvery)).catch((error: Error) =>
        options.log.debug("could not compare other processes' job definitions", { error: error.message }),
      );
    });
    every(Math.min(3_600_000, Math.max(1000, Math.floor(retentionMs / 10))), () => void this.prune());
    this.kick();
    void this.sweep();
    void this.prune();
  }

  /** Looks at the queue now (after an enqueue, say) instead of at the next poll. */
  kick(): void {
    if (this.stopped) return;
    if (this.draining) {
      this.drainAgain = true;
      return;
    }
    this.draining = this.drain()
      .then(
        () => this.queueFailures.succeeded(),
        (error: unknown) => this.queueFailures.failed(error),
      )
      .finally(() => {
        this.draining = undefined;
        if (this.drainAgain) {
          this.drainAgain = false;
          this.kick();
        }
      });
  }

  /**
   * Stops taking runs; waits up to `graceMs` for those running, then aborts
   * them (their runs go back to the queue, the attempt not counted) and gives
   * the runner lease up.
   */
  async stop(graceMs: number): Promise<void> {
    this.stopped = true;
    this.runner.halt();
    clearTimeout(this.scheduleTimer);
    for (const timer of this.timers) clearInterval(timer);
    await this.draining;
    // A check of other runners waits for the lease store, which may be down: it is not worth waiting long for.
    await Promise.race([this.sweeping, sleep(STOP_WAIT_MS)]);
    if (this.active.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
      await Promise.race([Promise.all(this.active), late]);
      clearTimeout(timer);
      // Closing first: an attempt whose signal is aborted finds it so, and gives its run back.
      this.closing.abort();
      for (const set of this.controllers.values()) for (const c of set) c.abort(new Error('the process stopped'));
      await Promise.all(this.active);
    }
    // Also ends the wait of attempts that ended while their function still runs: their no-overlap locks lapse.
    this.closing.abort();
    await this.runner.stop();
  }

  private names(): string[] {
    return [...this.definitions.keys()];
  }

  /** One timer, for the earliest next due time of every schedule. */
  private armSchedules(): void {
    if (this.stopped) return;
    const now = new Date();
    let earliest: number | undefined;
    for (const def of this.definitions.values()) {
      if (!def.schedule) continue;
      let due = this.nextDue.get(def.name);
      if (!due) {
        due = def.schedule.next(now);
        if (due) this.nextDue.set(def.name, due);
      }
      if (due && (earliest === undefined || due.getTime() < earliest)) earliest = due.getTime();
    }
    clearTimeout(this.scheduleTimer);
    if (earliest === undefined) return;
    // Timers are limited to about 24.8 days; a later run re-arms on the way.
    this.scheduleTimer = setTimeout(() => void this.dueNow(), Math.min(Math.max(0, earliest - Date.now()), 2 ** 31 - 1));
    this.scheduleTimer.unref();
  }

  private async dueNow(): Promise<void> {
    const now = Date.now();
    for (const def of this.definitions.values()) {
      let due = this.nextDue.get(def.name);
      // Every due time passed, oldest first: a process whose timer fired late (a stall) queues the runs it missed,
      // which other processes may have queued already (then its copies are refused as duplicates).
      for (let caughtUp = 0; def.schedule && due && due.getTime() <= now; caughtUp++) {
        if (caughtUp === MAX_CATCH_UP) {
          this.options.log.warn('too many due runs missed; skipping to the next', { job: def.name, from: due.toISOString() });
          due = def.schedule.next(new Date(now));
          break;
        }
        try {
          await this.options.history.addScheduled(def.name, due, def.priority, def.text);
        } catch (error) {
          this.options.log.warn('could not queue a scheduled run', { job: def.name, due: due.toISOString(), error: (error as Error).message });
        }
        due = def.schedule.next(due);
      }
      if (due) this.nextDue.set(def.name, due);
      else this.nextDue.delete(def.name);
    }
    this.armSchedules();
    this.kick();
  }

  private async drain(): Promise<void> {
    const { history, concurrency } = this.options;
    while (!this.stopped && this.active.size < concurrency) {
      const held = await this.runner.fresh();
      if (!held || this.stopped) return;
      const names = this.names();
      if (names.length === 0) return;
      const free = concurrency - this.active.size;
      const due = await history.due(new Date(), names, free * 3);
      if (due.length === 0) return;
      let claimed = 0;
      for (const run of spread(due)) {
        if (this.stopped || this.active.size >= concurrency) break;
        const def = this.definitions.get(run.job);
        if (!def) continue;
        const claim = await history.claim(run, held.holder, held.token, new Date());
        if (!claim) continue;
        claimed++;
        const attempt: Promise<void> = runAttempt(claim, def, {
          history,
          leases: this.options.leases,
          leaseTtlMs: this.options.leaseTtlMs,
          log: this.options.log,
          register: (holder, controller) => this.track(holder, controller),
          closing: this.closing.signal,
        })
          .catch((error: Error) => this.options.log.error('a job attempt could not be recorded', { job: run.job, run: run._id, error: error.message }))
          .finally(() => {
            this.active.delete(attempt);
            this.kick();
          });
        this.active.add(attempt);
      }
      // Every run read was taken by other processes: try again at the next poll rather than spin.
      if (claimed === 0) return;
    }
  }

  /**
   * Runs queued lately by a process that defines the job otherwise (a rolling upgrade that changes its schedule or
   * timeout, or a process of an older version left running): a scheduled job's runs then happen on both schedules,
   * and each run goes by the definition of the process that claims it. Said once per job and definition, as it lasts
   * until the last process of the other version stops.
   */
  private async checkDefinitions(since: Date): Promise<void> {
    for (const def of this.definitions.values()) {
      if (this.stopped) return;
      const there = await this.options.history.otherDefinition(def.name, def.text, since);
      if (there === undefined || this.otherDefinitions.has(`${def.name}\n${there}`)) continue;
      this.otherDefinitions.add(`${def.name}\n${there}`);
      this.options.log.warn('another process of this app defines this job otherwise: until every process defines it alike, each run goes by the definition of the process that takes it, and a schedule\'s runs happen on both', {
        job: def.name,
        here: def.text,
        there,
      });
    }
  }

  private track(holder: string, controller: AbortController): () => void {
    let set = this.controllers.get(holder);
    if (!set) this.controllers.set(holder, (set = new Set()));
    set.add(controller);
    return () => {
      set.delete(controller);
      if (set.size === 0) this.controllers.delete(holder);
    };
  }

  /** Our runner lease was taken over while we stalled: what we were running is another process's to retry now. */
  private lost(holder: string): void {
    for (const controller of this.controllers.get(holder) ?? []) controller.abort(new Error(runnerLost(holder)));
  }

  private sweep(): Promise<void> {
    return (this.sweeping ??= this.sweepOnce()
      .then(
        () => this.sweepFailures.succeeded(),
        (error: unknown) => this.sweepFailures.failed(error),
      )
      .finally(() => (this.sweeping = undefined)));
  }

  /**
   * Runs claimed by other runners whose lease has lapsed: taking a runner's
   * lease succeeds only when it stopped renewing it (dead, or stalled past
   * the time to live), and its token then grows, so its late results are refused.
   */
  private async sweepOnce(): Promise<void> {
    const me = this.runner.held;
    if (!me || this.stopped) return;
    const { history, leases, leaseTtlMs, log } = this.options;
    const byRunner = new Map<string, JobRun[]>();
    for (const run of await history.running(me.holder)) {
      if (!run.runner) continue;
      byRunner.set(run.runner, [...(byRunner.get(run.runner) ?? []), run]);
    }
    let recovered = 0;
    for (const [runner, runs] of byRunner) {
      const lease = leases({ name: RunnerLease.nameOf(runner), holder: me.holder, ttlMs: leaseTtlMs });
      if ((await lease.acquire()) === undefined) continue; // alive
      for (const run of runs) {
        const def = this.definitions.get(run.job);
        const outcome = await history.recoverLost(run, def ? def.retries + 1 : run.attempts + 1, new Date(), runnerLost(runner));
        if (!outcome) continue;
        recovered++;
        jobsMetrics.takenOver.inc();
        log.warn(outcome === 'requeued' ? 'took over a run whose runner was lost; it will be retried' : 'a run whose runner was lost has no attempts left', {
          job: run.job,
          run: run._id,
          runner,
          attempt: run.attempts,
        });
      }
      await lease.release();
    }
    if (recovered > 0) this.kick();
  }

  private async prune(): Promise<void> {
    try {
      const removed = await this.options.history.prune(new Date(Date.now() - this.options.retentionMs));
      if (removed > 0) this.options.log.debug('pruned the job history', { removed });
    } catch (error) {
      this.options.log.warn('could not prune the job history', { error: (error as Error).message });
    }
  }
}
