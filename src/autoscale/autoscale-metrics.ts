/**
 * What the autoscaler exports for Prometheus (prom-client, its own registry):
 * the desired and current counts and each server's load, so a cluster can
 * scale with KEDA or the HPA on these instead of letting the autoscaler act
 * (deploy/kubernetes/). Served by exporter.ts.
 */
import { Counter, Gauge, Registry } from 'prom-client';
import type { ServerEntry } from '../cluster/discovery-store.js';
import type { Decision } from './policy.js';

const LABELS = ['instance', 'pod', 'url'] as const;

export class AutoscaleMetrics {
  readonly registry = new Registry();
  // Registered at the first round (see round): unset, a gauge reads 0, and the HPA following a desired count of 0
  // scales down to its minimum whenever the autoscaler starts with its registry unreachable.
  private readonly desired = new Gauge({ name: 'perseid_autoscale_desired_instances', help: 'Servers the autoscaler wants, after its policy (min, max, cooldowns)', registers: [] });
  private readonly current = new Gauge({ name: 'perseid_autoscale_current_instances', help: 'Servers the platform runs or was last asked for', registers: [] });
  private readonly seen = new Gauge({ name: 'perseid_autoscale_servers_seen', help: 'Servers (web and all roles) in discovery at the last round', registers: [] });
  private counted = false;
  private readonly unsettled = new Gauge({ name: 'perseid_autoscale_unsettled_seconds', help: 'How long the change under way has been settling (0 when none is): alert when it stays high', registers: [this.registry] });
  private readonly failures = new Gauge({ name: 'perseid_autoscale_scale_failures', help: 'Scales that failed in a row (0 after one that worked)', registers: [this.registry] });
  private readonly roundFailures = new Gauge({
    name: 'perseid_autoscale_round_failures',
    help: 'Rounds that failed in a row (registry or platform unreachable, a scale refused; 0 after one that worked): meanwhile the other figures are the last good round\'s',
    registers: [this.registry],
  });
  private readonly changes = new Counter({ name: 'perseid_autoscale_changes_total', help: 'Changes the autoscaler made, by direction (none in a dry run)', labelNames: ['direction'], registers: [this.registry] });
  private readonly sessions = new Gauge({ name: 'perseid_instance_sessions', help: 'DDP sessions open on each server', labelNames: LABELS, registers: [this.registry] });
  private readonly cpu = new Gauge({ name: 'perseid_instance_cpu_percent', help: 'CPU of each server, percent of one core', labelNames: LABELS, registers: [this.registry] });
  // Base units (seconds, bytes), as Prometheus names them and as a server's own perseid_server_* gauges are.
  private readonly lag = new Gauge({ name: 'perseid_instance_event_loop_delay_seconds', help: 'Event-loop delay of each server', labelNames: LABELS, registers: [this.registry] });
  private readonly memory = new Gauge({ name: 'perseid_instance_resident_memory_bytes', help: 'Resident memory of each server', labelNames: LABELS, registers: [this.registry] });
  private readonly methodP95 = new Gauge({ name: 'perseid_instance_method_p95_seconds', help: '95th percentile method time of each server', labelNames: LABELS, registers: [this.registry] });

  constructor() {
    for (const direction of ['up', 'down']) this.changes.inc({ direction }, 0);
  }

  /** Records one round: the servers seen, the count, the decision, what holds a change up. */
  round(servers: readonly ServerEntry[], current: number, decision: Decision, state: { unsettledS: number; scaleFailures: number }): void {
    if (!this.counted) {
      for (const gauge of [this.desired, this.current, this.seen]) this.registry.registerMetric(gauge);
      this.counted = true;
    }
    this.desired.set(decision.desired);
    this.unsettled.set(state.unsettledS);
    this.failures.set(state.scaleFailures);
    this.current.set(current);
    this.seen.set(servers.length);
    const perServer = [this.sessions, this.cpu, this.lag, this.memory, this.methodP95];
    // Servers that left must not linger as stale series.
    for (const gauge of perServer) gauge.reset();
    for (const s of servers) {
      const labels = { instance: s.id, pod: s.host ?? '', url: s.url };
      this.sessions.set(labels, s.sessions);
      this.cpu.set(labels, s.cpuPercent);
      this.lag.set(labels, s.lagMs / 1000);
      this.memory.set(labels, Math.round((s.memoryMb ?? 0) * 1024 * 1024));
      this.methodP95.set(labels, (s.methodP95Ms ?? 0) / 1000);
    }
  }

  /** Records how many rounds in a row have failed. */
  failedRounds(count: number): void {
    this.roundFailures.set(count);
  }

  /** Counts a change the actuator made. */
  changed(direction: 'up' | 'down'): void {
    this.changes.inc({ direction });
  }
}
