/**
 * A jobs process's lease on itself: `jobs-runner:<holder>`, held for as long
 * as the process runs jobs and renewed every tenth of its time to live. Its
 * fencing token goes into every run the process claims, and every write that
 * ends a run is conditional on it. When the process dies or stalls past the
 * time to live, another process takes this lease over (the token grows) and
 * puts the runs back in the queue; a stalled process that wakes up finds its
 * token changed, aborts what it was running, and is refused when it tries to
 * record a result. It then starts over under a new name.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Lease, LeaseFactory } from '../coordination/lease.js';
import { FailureLog } from '../failure-log.js';
import type { Logger } from '../log.js';

export const RUNNER_LEASE_PREFIX = 'jobs-runner:';

/** Longest a stopping process waits for the lease store (a lease not given up expires by itself). */
export const STOP_WAIT_MS = 1000;

/**
 * How often a lease of `ttlMs` is renewed. A lease lapses when the event loop is blocked for longer than its time to
 * live less the time since its last renewal: renewing often keeps a block of up to 9/10 of the time to live safe.
 */
export function renewalInterval(ttlMs: number): number {
  return Math.max(10, Math.floor(ttlMs / 10));
}

export class RunnerLease {
  private lease: Lease | undefined;
  private current: { holder: string; token: number } | undefined;
  private timer: NodeJS.Timeout | undefined;
  private incarnation = 0;
  /** The renewal under way: one at a time, or answers piled up during an outage would each start a new incarnation. */
  private renewing: Promise<void> | undefined;
  /** When the lease was last confirmed ours (ms, performance.now(): a wall clock set back would keep it fresh). */
  private confirmedAt = -Infinity;
  private readonly failures: FailureLog;
  /** Resolved by `stop`: a claim waiting for the lease store gives up then. */
  private stopping = false;
  private stopped!: () => void;
  private readonly whenStopped = new Promise<void>((resolve) => (this.stopped = resolve));

  constructor(
    private readonly leases: LeaseFactory,
    private readonly baseHolder: string,
    readonly ttlMs: number,
    private readonly log: Logger,
    /** Called when the lease was lost: everything claimed under `holder` belongs to others now. */
    private readonly onLost: (holder: string) => void,
  ) {
    this.failures = new FailureLog(log, 'runner lease renewal');
  }

  /** This process's runner name and token now, or undefined while it holds no lease. */
  get held(): { holder: string; token: number } | undefined {
    return this.current;
  }

  async start(): Promise<void> {
    await this.take();
    this.timer = setInterval(() => void this.renew(), renewalInterval(this.ttlMs));
    this.timer.unref();
  }

  /**
   * The lease, confirmed recently enough to claim runs under it. After a
   * stall (renewals overdue) it is checked first, so a process that wakes up
   * does not claim runs under a token that was taken over while it slept;
   * while the lease store cannot confirm it, nothing is claimed.
   */
  async fresh(): Promise<{ holder: string; token: number } | undefined> {
    if (!this.stopping && !this.confirmed()) await Promise.race([this.renew(), this.whenStopped]);
    return !this.stopping && this.confirmed() ? this.current : undefined;
  }

  /** No more claims: `fresh` answers undefined from now on, at once (renewals go on for the runs under way). */
  halt(): void {
    this.stopping = true;
    this.stopped();
  }

  /**
   * Gives the lease up, waiting for the lease store a second at most: when it does not answer (Redis down), the lease
   * expires by itself, and the process must not wait for it to come back to stop.
   */
  async stop(): Promise<void> {
    this.halt();
    clearInterval(this.timer);
    const released = (async () => {
      await this.renewing;
      await this.lease?.release().catch(() => undefined);
    })();
    await Promise.race([released, sleep(STOP_WAIT_MS)]);
    this.current = undefined;
  }

  /** Lease name of a runner, for whoever checks whether it is alive. */
  static nameOf(holder: string): string {
    return `${RUNNER_LEASE_PREFIX}${holder}`;
  }

  private async take(): Promise<void> {
    const holder = this.incarnation === 0 ? this.baseHolder : `${this.baseHolder}.${this.incarnation}`;
    const lease = this.leases({ name: RunnerLease.nameOf(holder), holder, ttlMs: this.ttlMs });
    const token = await lease.acquire();
    if (token === undefined) {
      // Our own name is held: a previous incarnation was taken over and the taker still holds it. Use the next name.
      this.incarnation++;
      return this.take();
    }
    this.lease = lease;
    this.current = { holder, token };
    this.confirmedAt = performance.now();
  }

  private confirmed(): boolean {
    return this.current !== undefined && performance.now() - this.confirmedAt <= this.ttlMs / 2;
  }

  private renew(): Promise<void> {
    return (this.renewing ??= this.renewOnce().finally(() => (this.renewing = undefined)));
  }

  private async renewOnce(): Promise<void> {
    if (!this.lease) return;
    const before = this.current;
    let token: number | undefined;
    try {
      token = await this.lease.acquire();
    } catch (error) {
      // The lease store is unreachable: runs under way go on (nobody can take them over meanwhile), new ones wait.
      this.failures.failed(error);
      return;
    }
    this.failures.succeeded();
    if (before && token === before.token) {
      this.confirmedAt = performance.now();
      return;
    }
    // The next token: the lease lapsed (this process was stalled) and was taken again by nobody but this process (every
    // change of holder hands out the next one), so nothing it runs was taken over. It goes on under the new token.
    if (before && token === before.token + 1) {
      this.log.warn('the runner lease lapsed while this process was stalled; no other process took it, so its runs go on', { holder: before.holder });
      this.current = { holder: before.holder, token };
      this.confirmedAt = performance.now();
      return;
    }
    // Taken over while we stalled (or renewed into a new token after a takeover): give up what we had.
    if (before) {
      this.log.warn('the runner lease was taken over; runs claimed under it are retried elsewhere', { holder: before.holder });
      this.current = undefined;
      this.onLost(before.holder);
    }
    await this.lease.release().catch(() => undefined);
    this.incarnation++;
    await this.take().catch((error: Error) => this.log.warn('could not take a new runner lease', { error: error.message }));
  }
}
