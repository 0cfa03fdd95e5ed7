/**
 * The autoscaler: every round it reads each server's load from discovery
 * (servers whose role takes clients; jobs servers are left out), keeps the
 * rounds since the last change within a window, asks the policy for a
 * count, has the actuator make it so, prints one line with the figures and
 * the decision, and exports both for Prometheus. An actuator that does not act
 * (a dry run) makes no change of its own: there the change that restarts the
 * rounds and the cooldowns is a change of the count discovery shows (KEDA or
 * the HPA following the exported decision, say).
 */
import type { DiscoveryStore, ServerEntry } from '../cluster/discovery-store.js';
import { FailureLog } from '../failure-log.js';
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
}

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

  /** One round: figures, decision, action. */
  async round(now = Date.now()): Promise<Round> {
    const { store, ttlMs, actuator, policy, windowMs } = this.options;
    const servers = (await store.list(ttlMs)).filter((s) => s.role !== 'jobs');
    const current = await actuator.current(servers);
    if (!actuator.acts) {
      if (this.observed !== undefined && current !== this.observed) this.changed(now, this.observed, current);
      this.observed = current;
    }
    const sample: Sample = { at: now, servers: servers.length, averages: averages(servers) };
    // Discovery not yet showing the count asked for means a change is still under way.
    const settling = servers.length !== current ? `${servers.length} of ${current} servers in discovery` : await actuator.settling(servers);
    // Rounds of a change under way describe neither count: only settled ones are kept.
    this.samples = [...this.samples.filter((s) => s.at >= now - windowMs), ...(settling ? [] : [sample])];
    const decision = decide({ now, current, samples: this.samples, lastChange: this.lastChange, settling }, policy);
    const round: Round = { at: now, servers, current, sample, decision };
    this.options.print(roundLine(round));
    this.options.metrics?.round(servers, current, decision);
    if (decision.direction !== 'hold') {
      await actuator.scaleTo(decision.desired, servers);
      if (actuator.acts) {
        this.changed(now, current, decision.desired);
        this.options.metrics?.changed(decision.direction);
      }
    }
    return round;
  }

  /** The count changed: rounds start afresh (figures of the old count say little about the new), cooldowns from now. */
  private changed(at: number, from: number, to: number): void {
    this.lastChange = { at, from, to };
    this.samples = [];
  }
}
