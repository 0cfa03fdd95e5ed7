/**
 * The figures a person reads (the dashboard, `perseid top`), computed from one
 * or more processes' snapshots: histograms merged across workers and turned
 * into percentiles, breakdowns into means per call, query shapes and charts'
 * points summed over workers, traces and errors merged, with index advice and
 * capacity.
 */
import { adviceFor, capacityFor, longestDelayLastMinute, type ApmReport, type ApmSnapshot, type HistoryPoint, type ServerSummary } from './apm.js';
import { mergeShapes, type IndexAdvice } from './advisor.js';
import type { CapacityReport, CapacityTarget } from './capacity.js';
import type { ErrorRecord } from './error-store.js';
import { Histogram } from './histogram.js';
import { PARTS } from './method-stats.js';
import type { TraceRecord } from './trace.js';

export interface MethodRow {
  name: string;
  calls: number;
  errors: number;
  /** Calls per second over the recent window (30 to 60 s). */
  rate: number;
  p50: number;
  p95: number;
  p99: number;
  /** Mean ms per call since start, per part (wait, db, async, compute, waitedOn). */
  breakdown: Record<(typeof PARTS)[number], number>;
}

export interface PublicationRow {
  name: string;
  subs: number;
  active: number;
  errors: number;
  /** Subscriptions per second over the recent window. */
  rate: number;
  readyP50: number;
  readyP95: number;
  initialDocs: number;
  initialBytes: number;
  /** Documents sent after ready (added, changed, removed) over every subscriber. */
  liveDocs: number;
  liveBytes: number;
  /** Share of its cursors that joined a running live query. */
  observerReuse: number;
}

export interface ProcessRow {
  worker?: string;
  pid: number;
  cpu: number;
  rssMb: number;
  heapMb: number;
  lagP99: number;
  /** The longest event-loop delay of the last minute, ms (a stall every few seconds never reaches the p99). */
  lagMax: number;
  utilization: number;
  gcMs: number;
  sessions: number;
}

/** What went over the wire, summed over the processes. */
export interface TrafficRow {
  /** Sessions opened since start, by transport. */
  sessionsOpened: Record<string, number>;
  messagesIn: number;
  /** Characters of the messages received (after decompression). */
  charactersIn: number;
  messagesOut: number;
  bytesOut: number;
  /** Compressed connections: bytes written per byte of message, or null with none. */
  compressionRatio: number | null;
}

export interface DashboardView {
  at: number;
  /** Worker processes (or the one process), then a workers' primary as `worker: 'primary'`. */
  processes: ProcessRow[];
  /** Every server's load, when the process balances a cluster or is a workers' primary. */
  servers: ServerSummary[];
  /** The server read, when it is a cluster's member: every other figure is its own (its workers'), not the cluster's. */
  server?: string;
  traffic: TrafficRow;
  history: HistoryPoint[];
  methods: MethodRow[];
  publications: PublicationRow[];
  liveQueries: { created: number; reused: number; reuseRatio: number; active: number; docsRead: number; requeries: number; byStrategy: Record<string, number>; bySource: Record<string, number> };
  shapes: Array<{ collection: string; shape: string; ops: number; avgMs: number; returned: number; examinedPerReturned: number | null; plan?: string }>;
  traces: Array<OnWorker<TraceRecord>>;
  errors: Array<OnWorker<ErrorRecord>>;
  advice: IndexAdvice[];
  capacity: CapacityReport;
  jobs?: unknown;
}

/** A trace or an error with the worker it happened on, when a workers' primary lists them (its workers' together). */
export type OnWorker<T> = T & { worker?: string };

function onWorker<T extends object>(items: T[], { worker }: ApmReport): Array<OnWorker<T>> {
  return worker === undefined ? items : items.map((item) => ({ ...item, worker }));
}

/** Per second over a process's recent window; at least a second, so a call just after start is not a burst of thousands. */
function perSecond(count: number, report: ApmReport): number {
  return count / Math.max(1, report.recentSeconds);
}

/**
 * The recent times of every process, or all times when no process had a recent one: never one
 * process's recent times merged with another's since its start.
 */
function recentOrAll(recent: Histogram, all: Histogram): Histogram {
  return recent.count > 0 ? recent : all;
}

function counter(snapshot: ApmSnapshot, name: string): number {
  return snapshot.reports.reduce((n, r) => r.counters.reduce((m, c) => (c.name === name ? m + c.value : m), n), 0);
}

/** Points of every process summed by their position from the newest (they sample at the same period). */
function mergeHistory(histories: HistoryPoint[][]): HistoryPoint[] {
  if (histories.length === 1) return histories[0]!;
  const length = Math.max(0, ...histories.map((h) => h.length));
  const out: HistoryPoint[] = [];
  for (let back = length; back >= 1; back--) {
    const points = histories.map((h) => h[h.length - back]).filter((p): p is HistoryPoint => p !== undefined);
    const sum = (f: (p: HistoryPoint) => number) => points.reduce((n, p) => n + f(p), 0);
    const max = (f: (p: HistoryPoint) => number) => Math.max(0, ...points.map(f));
    out.push({
      t: max((p) => p.t),
      cpu: sum((p) => p.cpu),
      rssMb: sum((p) => p.rssMb),
      heapMb: sum((p) => p.heapMb),
      lagP99: max((p) => p.lagP99),
      lagMax: max((p) => p.lagMax),
      gcMs: sum((p) => p.gcMs),
      sessions: sum((p) => p.sessions),
      methodsPerSec: sum((p) => p.methodsPerSec),
      subsPerSec: sum((p) => p.subsPerSec),
      messagesInPerSec: sum((p) => p.messagesInPerSec),
      docsReadPerSec: sum((p) => p.docsReadPerSec),
      // The worst process's percentiles: a merged percentile would need the intervals' histograms.
      methodP50: max((p) => p.methodP50),
      methodP95: max((p) => p.methodP95),
      methodP99: max((p) => p.methodP99),
      readyP95: max((p) => p.readyP95),
    });
  }
  return out;
}

export function dashboardView(snapshot: ApmSnapshot, target?: CapacityTarget): DashboardView {
  const { reports } = snapshot;
  const methods = new Map<string, { calls: number; errors: number; rate: number; recent: Histogram; total: Histogram; parts: number[] }>();
  for (const r of reports) {
    for (const m of r.methods) {
      const row = methods.get(m.name) ?? { calls: 0, errors: 0, rate: 0, recent: new Histogram(), total: new Histogram(), parts: PARTS.map(() => 0) };
      row.calls += m.calls;
      row.errors += m.errors;
      row.rate += perSecond(m.recent.calls, r);
      row.recent.add(m.recent.time);
      row.total.add(m.time);
      m.parts.forEach((v, i) => (row.parts[i]! += v));
      methods.set(m.name, row);
    }
  }
  const publications = new Map<string, PublicationRow & { ready: Histogram; readyTotal: Histogram; reused: number; observers: number }>();
  for (const r of reports) {
    for (const p of r.publications) {
      const row = publications.get(p.name) ?? {
        name: p.name,
        subs: 0,
        active: 0,
        errors: 0,
        rate: 0,
        readyP50: 0,
        readyP95: 0,
        initialDocs: 0,
        initialBytes: 0,
        liveDocs: 0,
        liveBytes: 0,
        observerReuse: 0,
        ready: new Histogram(),
        readyTotal: new Histogram(),
        reused: 0,
        observers: 0,
      };
      row.subs += p.subs;
      row.active += p.active;
      row.errors += p.errors;
      row.initialDocs += p.initialDocs;
      row.initialBytes += p.initialBytes;
      row.liveDocs += p.live.added + p.live.changed + p.live.removed;
      row.liveBytes += p.liveBytes.added + p.liveBytes.changed + p.liveBytes.removed;
      row.rate += perSecond(p.recentSubs, r);
      row.ready.add(p.recentReady);
      row.readyTotal.add(p.ready);
      row.reused += p.observersReused;
      row.observers += p.observersCreated + p.observersReused;
      publications.set(p.name, row);
    }
  }
  const created = counter(snapshot, 'perseid_live_queries_created_total');
  const reused = counter(snapshot, 'perseid_live_query_reuses_total');
  const byStrategy: Record<string, number> = {};
  for (const r of reports) for (const [k, v] of Object.entries(r.liveQueries.active)) byStrategy[k] = (byStrategy[k] ?? 0) + v;
  const bySource: Record<string, number> = {};
  for (const r of reports) for (const [k, v] of Object.entries(r.liveQueries.activeBySource)) bySource[k] = (bySource[k] ?? 0) + v;
  const traces = reports
    .flatMap((r) => onWorker(r.traces, r))
    .sort((a, b) => b.total - a.total)
    .slice(0, 30);
  const errors = reports
    .flatMap((r) => onWorker(r.errors, r))
    .sort((a, b) => b.lastAt - a.lastAt)
    .slice(0, 30);
  const shapes = mergeShapes(reports.flatMap((r) => r.database.shapes))
    .sort((a, b) => b.timeMs - a.timeMs)
    .slice(0, 30)
    .map((s) => {
      const row: DashboardView['shapes'][number] = {
        collection: s.collection,
        shape: s.shape.key,
        ops: s.ops,
        avgMs: s.ops ? s.timeMs / s.ops : 0,
        returned: s.returned,
        examinedPerReturned: s.measuredOps > 0 ? s.examined / Math.max(1, s.measuredReturned) : null,
      };
      if (s.plan) row.plan = s.plan.index ? `${s.plan.stage} ${s.plan.index}` : s.plan.stage;
      return row;
    });
  const sessionsOpened: Record<string, number> = {};
  for (const r of reports) for (const [k, v] of Object.entries(r.sessionsOpened)) sessionsOpened[k] = (sessionsOpened[k] ?? 0) + v;
  const compressedIn = counter(snapshot, 'perseid_compression_input_bytes_total');
  const processes: ProcessRow[] = reports.map((r) => {
    const row: ProcessRow = {
      pid: r.pid,
      cpu: r.process.cpuUser + r.process.cpuSystem,
      rssMb: r.process.rssMb,
      heapMb: r.process.heapUsedMb,
      lagP99: r.process.lagP99,
      lagMax: longestDelayLastMinute(r.history, r.at, r.process.lagMax),
      utilization: r.process.utilization,
      gcMs: Object.values(r.process.gcMs).reduce((a, b) => a + b, 0),
      sessions: r.sessions.sessions,
    };
    if (r.worker !== undefined) row.worker = r.worker;
    return row;
  });
  const primary = snapshot.primary;
  if (primary) {
    processes.push({
      worker: 'primary',
      pid: primary.pid,
      cpu: primary.cpuUser + primary.cpuSystem,
      rssMb: primary.rssMb,
      heapMb: primary.heapUsedMb,
      lagP99: primary.lagP99,
      lagMax: primary.lagMaxLastMinute,
      utilization: primary.utilization,
      gcMs: Object.values(primary.gcMs).reduce((a, b) => a + b, 0),
      sessions: 0,
    });
  }
  const view: DashboardView = {
    at: Date.now(),
    processes,
    servers: snapshot.servers ?? [],
    traffic: {
      sessionsOpened,
      messagesIn: counter(snapshot, 'perseid_messages_received_total'),
      charactersIn: counter(snapshot, 'perseid_received_characters_total'),
      messagesOut: counter(snapshot, 'perseid_messages_sent_total'),
      bytesOut: counter(snapshot, 'perseid_bytes_sent_total'),
      compressionRatio: compressedIn > 0 ? counter(snapshot, 'perseid_compression_output_bytes_total') / compressedIn : null,
    },
    history: mergeHistory(reports.map((r) => r.history)),
    methods: [...methods]
      .map(([name, m]) => {
        const times = recentOrAll(m.recent, m.total);
        return {
          name,
          calls: m.calls,
          errors: m.errors,
          rate: m.rate,
          p50: times.percentile(50),
          p95: times.percentile(95),
          p99: times.percentile(99),
          breakdown: Object.fromEntries(PARTS.map((part, i) => [part, m.calls ? m.parts[i]! / m.calls : 0])) as MethodRow['breakdown'],
        };
      })
      .sort((a, b) => b.calls - a.calls),
    publications: [...publications.values()]
      .map(({ ready, readyTotal, reused: r, observers, ...row }) => {
        const times = recentOrAll(ready, readyTotal);
        return { ...row, readyP50: times.percentile(50), readyP95: times.percentile(95), observerReuse: observers ? r / observers : 0 };
      })
      .sort((a, b) => b.subs - a.subs),
    liveQueries: {
      created,
      reused,
      reuseRatio: created + reused > 0 ? reused / (created + reused) : 0,
      active: counter(snapshot, 'perseid_live_queries_active'),
      docsRead: counter(snapshot, 'perseid_live_query_documents_read_total'),
      requeries: counter(snapshot, 'perseid_live_query_requeries_total'),
      byStrategy,
      bySource,
    },
    shapes,
    traces,
    errors,
    advice: adviceFor(snapshot),
    capacity: capacityFor(snapshot, target),
  };
  if (snapshot.jobs !== undefined) view.jobs = snapshot.jobs;
  if (snapshot.server !== undefined) view.server = snapshot.server;
  return view;
}

/** Several processes' snapshots as one (a primary's workers). */
export function mergeSnapshots(snapshots: readonly ApmSnapshot[]): ApmSnapshot {
  const out: ApmSnapshot = { reports: snapshots.flatMap((s) => s.reports), indexes: {} };
  for (const s of snapshots) {
    out.indexUse ??= s.indexUse;
    for (const [c, list] of Object.entries(s.indexes)) if (list) out.indexes[c] ??= list;
    if (s.jobs !== undefined && out.jobs === undefined) out.jobs = s.jobs;
  }
  return out;
}
