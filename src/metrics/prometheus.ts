/**
 * `/metrics`: the APM's figures in Prometheus's text format, written by
 * prom-client (its escaping, its format) from one or more processes' reports.
 * Conventional names and units: seconds, bytes, `_total` for counters. A
 * primary with workers passes every worker's report; each series then has a
 * `worker` label, so one scrape covers the machine, and the primary's own
 * process figures come as `worker="primary"`. A cluster's balancer (and a
 * primary) adds every server's load summary with a `server` label. Labels are names the cap
 * in bounded-names.ts keeps few (methods, publications, collections, query
 * shapes), never arguments, ids or values.
 */
import { Registry } from 'prom-client';
import type { ApmReport, ApmSnapshot, ServerSummary } from './apm.js';
import { Histogram, PROMETHEUS_BOUNDS_SECONDS, type HistogramData } from './histogram.js';
import { PARTS } from './method-stats.js';

type Labels = Record<string, string | number>;
interface Value {
  value: number;
  labels: Labels;
  metricName?: string;
}

/** A metric prom-client formats: its `get()` gives the values we computed. */
class Family {
  readonly values: Value[] = [];
  constructor(
    readonly name: string,
    readonly help: string,
    readonly type: 'counter' | 'gauge' | 'histogram',
  ) {}

  get(): { name: string; help: string; type: string; values: Value[]; aggregator: string } {
    return { name: this.name, help: this.help, type: this.type, values: this.values, aggregator: 'sum' };
  }

  add(value: number, labels: Labels): void {
    this.values.push({ value, labels });
  }

  /** A histogram of ms as seconds, with Prometheus's conventional buckets. */
  addHistogram(data: HistogramData, labels: Labels): void {
    const histogram = Histogram.from(data);
    for (const bound of PROMETHEUS_BOUNDS_SECONDS) this.values.push({ metricName: `${this.name}_bucket`, value: histogram.countAtMost(bound * 1000), labels: { ...labels, le: bound } });
    this.values.push({ metricName: `${this.name}_bucket`, value: histogram.count, labels: { ...labels, le: '+Inf' } });
    this.values.push({ metricName: `${this.name}_sum`, value: histogram.sum / 1000, labels });
    this.values.push({ metricName: `${this.name}_count`, value: histogram.count, labels });
  }
}

const MB = 1024 * 1024;

type FamilyOf = (name: string, help: string, type: Family['type']) => Family;

/** A process's own figures (a worker's, a single server's, or a primary's labelled `worker="primary"`). */
function processFamilies(family: FamilyOf, p: ApmReport['process'], base: Labels): void {
  family('perseid_process_cpu_seconds_total', 'CPU time used by the process', 'counter').add(p.cpuUserSeconds, { ...base, mode: 'user' });
  family('perseid_process_cpu_seconds_total', '', 'counter').add(p.cpuSystemSeconds, { ...base, mode: 'system' });
  family('perseid_process_resident_memory_bytes', 'Resident memory', 'gauge').add(Math.round(p.rssMb * MB), base);
  family('perseid_process_heap_used_bytes', 'V8 heap in use', 'gauge').add(Math.round(p.heapUsedMb * MB), base);
  family('perseid_process_heap_total_bytes', 'V8 heap reserved', 'gauge').add(Math.round(p.heapTotalMb * MB), base);
  family('perseid_event_loop_utilization_ratio', 'Share of time the event loop was busy (last sample)', 'gauge').add(p.utilization, base);
  family('perseid_event_loop_delay_seconds', 'Event-loop delay (how late timers ran)', 'histogram').addHistogram(p.eventLoopDelay, base);
  for (const [kind, data] of Object.entries(p.gc)) family('perseid_gc_duration_seconds', 'Garbage collection pauses by kind', 'histogram').addHistogram(data, { ...base, kind });
}

/** Every server's load as a balancer or a workers' primary knows it, labelled by server. */
function serverFamilies(family: FamilyOf, servers: readonly ServerSummary[]): void {
  for (const s of servers) {
    const labels = { server: s.server };
    family('perseid_server_sessions', 'DDP sessions open on each server of the cluster (or worker of the machine)', 'gauge').add(s.sessions, labels);
    family('perseid_server_cpu_percent', 'CPU of each server, percent of one core (averaged over a few seconds)', 'gauge').add(s.cpuPercent, labels);
    family('perseid_server_event_loop_delay_seconds', 'Event-loop delay of each server (p99 of its recent windows)', 'gauge').add(s.lagMs / 1000, labels);
    family('perseid_server_resident_memory_bytes', 'Resident memory of each server', 'gauge').add(Math.round(s.memoryMb * MB), labels);
    family('perseid_server_methods_per_second', 'Method calls per second on each server, since its last announcement', 'gauge').add(s.methodsPerSec, labels);
    family('perseid_server_method_p95_seconds', '95th percentile method time of each server, since its last announcement', 'gauge').add(s.methodP95Ms / 1000, labels);
  }
}

/**
 * The Prometheus text of `reports` (one per process), with every server's
 * summary and a primary's own process figures when the snapshot has them.
 */
export async function prometheusText(reports: readonly ApmReport[], extra: Pick<ApmSnapshot, 'servers' | 'primary'> = {}): Promise<string> {
  const families = new Map<string, Family>();
  const family: FamilyOf = (name, help, type) => {
    let f = families.get(name);
    if (!f) families.set(name, (f = new Family(name, help, type)));
    return f;
  };
  for (const report of reports) {
    const base: Labels = report.worker === undefined ? {} : { worker: report.worker };
    for (const c of report.counters) family(c.name, c.help, c.kind).add(c.value, { ...base, ...c.labels });
    for (const m of report.methods) {
      const labels = { ...base, method: m.name };
      family('perseid_method_duration_seconds', 'Method calls by time from the message arriving to the result (count: calls)', 'histogram').addHistogram(m.time, labels);
      family('perseid_method_errors_total', 'Method calls that ended in an error', 'counter').add(m.errors, labels);
      PARTS.forEach((part, i) =>
        family('perseid_method_breakdown_seconds_total', 'Method time by part: wait (queued), db, async (other awaits), compute; waitedOn (others held back)', 'counter').add(m.parts[i]! / 1000, { ...labels, part }),
      );
    }
    for (const p of report.publications) {
      const labels = { ...base, publication: p.name };
      family('perseid_publication_subscriptions_total', 'Subscriptions started', 'counter').add(p.subs, labels);
      family('perseid_publication_unsubscriptions_total', 'Subscriptions stopped', 'counter').add(p.unsubs, labels);
      family('perseid_publication_active_subscriptions', 'Subscriptions open now', 'gauge').add(p.active, labels);
      family('perseid_publication_errors_total', 'Subscriptions that failed', 'counter').add(p.errors, labels);
      family('perseid_publication_ready_seconds', 'Time from the sub message arriving to ready', 'histogram').addHistogram(p.ready, labels);
      family('perseid_publication_lifetime_seconds', 'How long stopped subscriptions were open', 'histogram').addHistogram(p.lifetime, labels);
      family('perseid_publication_initial_documents_total', 'Documents sent before ready', 'counter').add(p.initialDocs, labels);
      family('perseid_publication_initial_bytes_total', 'Encoded size of the documents sent before ready', 'counter').add(p.initialBytes, labels);
      for (const kind of ['added', 'changed', 'removed'] as const) {
        family('perseid_publication_live_documents_total', 'Documents sent after ready, by kind (added, changed, removed), over every subscriber', 'counter').add(p.live[kind], { ...labels, kind });
        family('perseid_publication_live_bytes_total', 'Encoded size of the messages sent after ready, by kind, over every subscriber', 'counter').add(p.liveBytes[kind], { ...labels, kind });
      }
      family('perseid_publication_observers_total', 'Cursors attached to a live query: a new one (reused=false) or a running one', 'counter').add(p.observersCreated, { ...labels, reused: 'false' });
      family('perseid_publication_observers_total', '', 'counter').add(p.observersReused, { ...labels, reused: 'true' });
    }
    for (const [strategy, n] of Object.entries(report.liveQueries.created)) {
      family('perseid_live_queries_started_total', 'Live queries started, by strategy', 'counter').add(n, { ...base, strategy });
      family('perseid_live_queries_running', 'Live queries running now, by strategy', 'gauge').add(report.liveQueries.active[strategy as 'set'], { ...base, strategy });
    }
    for (const [source, n] of Object.entries(report.liveQueries.createdBySource)) {
      family('perseid_live_queries_source_started_total', 'Live queries started, by change source (change-stream, oplog, polling, embedded, fanout)', 'counter').add(n, { ...base, source });
      family('perseid_live_queries_source_running', 'Live queries running now, by change source', 'gauge').add(report.liveQueries.activeBySource[source] ?? 0, { ...base, source });
    }
    family('perseid_live_query_lifetime_seconds', 'How long stopped live queries ran', 'histogram').addHistogram(report.liveQueries.lifetime, base);
    for (const o of report.database.operations) {
      const labels = { ...base, collection: o.collection, operation: o.op };
      family('perseid_db_operation_duration_seconds', 'Database operations by time (count: operations)', 'histogram').addHistogram(o.time, labels);
      family('perseid_db_operation_errors_total', 'Database operations that failed', 'counter').add(o.errors, labels);
    }
    for (const s of report.database.shapes) {
      const labels = { ...base, collection: s.collection, shape: s.shape.key };
      family('perseid_db_query_shape_operations_total', 'Queries per collection and shape (selector keys and operator kinds, sort; never values)', 'counter').add(s.ops, labels);
      family('perseid_db_query_shape_seconds_total', 'Time spent in queries of the shape', 'counter').add(s.timeMs / 1000, labels);
      family('perseid_db_query_shape_slow_total', 'Queries of the shape slower than the slow threshold', 'counter').add(s.slow, labels);
      family('perseid_db_documents_returned_total', 'Documents returned by queries of the shape', 'counter').add(s.returned, labels);
      family('perseid_db_documents_examined_total', 'Documents examined by the queries of the shape whose plan said', 'counter').add(s.examined, labels);
    }
    for (const c of report.database.commands) {
      family('perseid_mongodb_command_duration_seconds', 'MongoDB commands as the driver reports them (command monitoring)', 'histogram').addHistogram(c.time, { ...base, command: c.name });
      family('perseid_mongodb_command_failures_total', 'MongoDB commands that failed', 'counter').add(c.failures, { ...base, command: c.name });
    }
    processFamilies(family, report.process, base);
    for (const [transport, n] of Object.entries(report.sessions.byTransport)) family('perseid_sessions_by_transport', 'DDP sessions open now, by transport', 'gauge').add(n, { ...base, transport });
    for (const [transport, n] of Object.entries(report.sessionsOpened)) family('perseid_sessions_opened_by_transport_total', 'DDP sessions opened (not resumed), by transport', 'counter').add(n, { ...base, transport });
    family('perseid_users_distinct', 'Distinct logged-in users over the open sessions', 'gauge').add(report.sessions.users, base);
    family('perseid_apm_names_overflowed_total', 'Names counted under (other) because the cap on distinct names was reached', 'counter').add(report.overflowed.methods + report.overflowed.publications + report.overflowed.shapes, base);
  }
  if (extra.primary) processFamilies(family, extra.primary, { worker: 'primary' });
  if (extra.servers) serverFamilies(family, extra.servers);
  const registry = new Registry();
  for (const f of families.values()) registry.registerMetric(f as never);
  return registry.metrics();
}

export const PROMETHEUS_CONTENT_TYPE = Registry.PROMETHEUS_CONTENT_TYPE;
