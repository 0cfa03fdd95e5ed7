/**
 * The autoscaler: every round it reads each server's load from discovery
 * (servers whose role takes clients; jobs servers are left out), keeps the
 * rounds since the last change within a window, asks the policy for a
 * count, has the actuator make it so, prints one line with the figures and
 * the decision, and exports both for Prometheus. An actuator that does not act
 * (a dry run) makes no change of its own: there the change that restarts the
 * rounds and the cooldowns is a change of the count discovery shows (KEDA or
 * the HPA following the exported decision, say).
 *
 * Two ways a platform can fail it, and what it does then: a change that never
 * settles (a pod that cannot be scheduled, a command that succeeded while the
 * platform did something else) is waited on for `settleTimeoutMs`, then
 * warned about once and decided past, from the servers that answer, so the
 * count can still come down; a scale that fails is tried again after a delay
 * that doubles with each failure, not every round.
 */
import type { DiscoveryStore, ServerEntry } from '../cluster/discovery-store.js';
import { FailureLog, reasonOf } from '../failure-log.js';
import type { Logger } from '../log.js';
import type { Actuator } from './actuator.js';
import type { AutoscaleMetrics } from './autoscale-metrics.js';
import { decide, METRICS, type Decision, type Metric, type PolicyConfig, type Sample } from './policy.js';

export interface AutoscalerOptions {
  store: DiscoveryStore;
  /** How long a discovery entry lives without renewal (3 × the servers' announce interval). */
  ttlMs: number;
  actuator: Actuator;
  policy: PolicyConfig;
  intervalMs: number;
  /** Rounds older than this are forgotten. */
  windowMs: number;
  /** Where each round's line goes (stdout). */
  print: (line: string) => void;
  log: Logger;
  metrics?: AutoscaleMetrics;
  /** How long a change may take to settle before the autoscaler says so and decides without waiting (default 600000). */
  settleTimeoutMs?: number;
}

/** The longest delay before trying a failed scale again. */
const MAX_RETRY_DELAY_MS = 300_000;

export interface Round {
  at: number;
  servers: ServerEntry[];
  current: number;
  sample: Sample;
  decision: Decision;
}

function averages(servers: readonly ServerEntry[]): Record<Metric, number> {
  const out = {} as Record<Metric, number>;
  for (const metric of METRICS) {
    const values = servers.map((s) => Number(s[metric] ?? 0));
    out[metric] = values.length ? values.reduce((a, b) => a + b, 0) / values.length : 0;
  }
  return out;
}

const round1 = (n: number) => Math.round(n * 10) / 10;

/** The round's line: the time, the count, the figures per server, the decision. */
export function roundLine(round: Round): string {
  const a = round.sample.averages;
  const figures = `sessions ${round1(a.sessions)}  cpu ${round1(a.cpuPercent)}%  lag ${round1(a.lagMs)} ms  memory ${Math.round(a.memoryMb)} MB  method p95 ${round1(a.methodP95Ms)} ms`;
  const { decision } = round;
  const verdict = decision.direction === 'hold' ? `hold at ${decision.desired}` : `scale ${decision.direction} to ${decision.desired}`;
  return `${new Date(round.at).toISOString()} autoscale  servers ${round.servers.length}/${round.current}  per server: ${figures}  ->  ${verdict} (${decision.reason})`;
}

export class Autoscaler {
  private samples: Sample[] = [];
  private lastChange: { at: number; from: number; to: number } | undefined;
  /** A dry run's count at the previous round. */
  private observed: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private readonly failures: FailureLog;
  /** When the change under way started settling, and whether the operator was told it takes too long. */
  private unsettled: { since: number; warned: boolean } | undefined;
  /** Scales that failed in a row, and the earliest time to try again. */
  private scaleFailures: { count: number; retryAt: number; reason: string } | undefined;
  /** Rounds that failed in a row (exported). */
  private roundFailures = 0;

  constructor(private readonly options: AutoscalerOptions) {
    this.failures = new FailureLog(options.log, 'autoscale round');
  }

  start(): void {
    const tick = () => {
      if (this.stopped) return;
      this.running = this.round()
        .then(() => this.failures.succeeded())
        // An unreachable registry or platform: say so once, keep trying (each round starts afresh).
        .catch((error: unknown) => this.failures.failed(error))
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(tick, this.options.intervalMs);
        });
    };
    tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.options.actuator.abort?.();
    await this.running;
  }

  /** One round: figures, decision, action; one that fails counts in the exported rounds failed in a row. */
  async round(now = Date.now()): Promise<Round> {
    try {
      const round = await this.decideAndAct(now);
      this.roundFailures = 0;
      return round;
    } catch (error) {
      this.roundFailures++;
      throw error;
    } finally {
      this.options.metrics?.failedRounds(this.roundFailures);
    }
  }

  private async decideAndAct(now: number): Promise<Round> {
    const { store, ttlMs, actuator, policy, windowMs } = this.options;
    const servers = (await store.list(ttlMs)).filter((s) => s.role !== 'jobs');
    const current = await actuator.current(servers);
    if (!actuator.acts) {
      if (this.observed !== undefined && current !== this.observed) this.changed(now, this.observed, current);
      this.observed = current;
    }
    const sample: Sample = { at: now, servers: servers.length, averages: averages(servers) };
    // Discovery not yet showing the count asked for means a change is still under way.
    const settling = this.waitOn(now, servers.length !== current ? `${servers.length} of ${current} servers in discovery` : await actuator.settling(servers));
    // Rounds of a change under way describe neither count: only settled ones are kept.
    this.samples = [...this.samples.filter((s) => s.at >= now - windowMs), ...(settling ? [] : [sample])];
    const decision = this.heldForRetry(now, current, decide({ now, current, samples: this.samples, lastChange: this.lastChange, settling }, policy));
    if (this.unsettled?.warned) decision.reason += ` (a change unsettled for ${Math.round((now - this.unsettled.since) / 1000)} s)`;
    const round: Round = { at: now, servers, current, sample, decision };
    this.options.print(roundLine(round));
    this.options.metrics?.round(servers, current, decision, {
      unsettledS: this.unsettled ? (now - this.unsettled.since) / 1000 : 0,
      scaleFailures: this.scaleFailures?.count ?? 0,
    });
    if (decision.direction !== 'hold') {
      const done = await this.scale(now, decision.desired, servers);
      if (done && actuator.acts) {
        this.changed(now, current, decision.desired);
        this.options.metrics?.changed(decision.direction);
      }
    }
    return round;
  }

  /**
   * What a change under way waits on, as the policy should see it: `settling` until the change has taken
   * `settleTimeoutMs`, then nothing (said once), so the count follows the servers that do answer.
   */
  private waitOn(now: number, settling: string | undefined): string | undefined {
    if (!settling) {
      if (this.unsettled?.warned) this.options.log.info('the change settled', { afterS: Math.round((now - this.unsettled.since) / 1000) });
      this.unsettled = undefined;
      return undefined;
    }
    this.unsettled ??= { since: now, warned: false };
    const timeoutMs = this.options.settleTimeoutMs ?? 600_000;
    if (now - this.unsettled.since < timeoutMs) return settling;
    if (!this.unsettled.warned) {
      this.unsettled.warned = true;
      this.options.log.warn('a change has not settled in time; deciding from the servers that answer: check the platform', { settling, afterS: Math.round(timeoutMs / 1000) });
    }
    return undefined;
  }

  /** Holds a change while a failed scale waits for its next try. */
  private heldForRetry(now: number, current: number, decision: Decision): Decision {
    const failed = this.scaleFailures;
    if (decision.direction === 'hold' || !failed || now >= failed.retryAt) return decision;
    const times = failed.count === 1 ? 'once' : `${failed.count} times`;
    return { desired: current, direction: 'hold', reason: `${decision.reason}, but scaling failed ${times} (${failed.reason}): next try in ${Math.ceil((failed.retryAt - now) / 1000)} s` };
  }

  /**
   * Has the actuator make the count `n`; a failure delays the next try, doubling with each in a row. Resolves false
   * when the autoscaler stopped it (its own doing: no failure, nothing to retry).
   */
  private async scale(now: number, n: number, servers: readonly ServerEntry[]): Promise<boolean> {
    try {
      await this.options.actuator.scaleTo(n, servers);
      this.scaleFailures = undefined;
      return true;
    } catch (error) {
      if (this.stopped) {
        this.options.log.info('stopped the scale under way: it may have been applied in part', { to: n });
        return false;
      }
      const count = (this.scaleFailures?.count ?? 0) + 1;
      const delay = Math.min(MAX_RETRY_DELAY_MS, this.options.intervalMs * 2 ** (count - 1));
      this.scaleFailures = { count, retryAt: now + delay, reason: reasonOf(error) };
      throw error;
    }
  }

  /** The count changed: rounds start afresh (figures of the old count say little about the new), cooldowns from now. */
  private changed(at: number, from: number, to: number): void {
    this.lastChange = { at, from, to };
    this.samples = [];
    // A new change gets its own time to settle.
    this.unsettled = undefined;
  }
}
