/**
 * The APM: where every layer records what it did (methods, subscriptions,
 * database operations, live queries, the process), and what the endpoints
 * read (`/metrics`, `/perseid/apm`, the dashboard, advice, capacity). One per
 * process, like the counters' registry; on by default, off with
 * `PERSEID_APM=off` (then recording is a flag check and nothing else).
 *
 * Cost: a call makes one Trace (a few numbers, an event list capped at 64);
 * per-name figures are fixed-bucket histograms; nothing is counted per
 * subscriber of a change; the process is sampled every 2 s by one timer.
 */
import { adviseIndexes, DEFAULT_ADVISOR_OPTIONS, mergeShapes, type IndexAdvice, type ShapeFigures } from './advisor.js';
import { BoundedNames } from './bounded-names.js';
import { capacityReport, type CapacityReport, type CapacityTarget } from './capacity.js';
import { DatabaseStats, type IndexDescription, type IndexUse } from './database-stats.js';
import { ErrorStore, type ErrorRecord } from './error-store.js';
import { Histogram, type HistogramData } from './histogram.js';
import { LiveQueryStats, type LiveQueryStrategy } from './live-query-stats.js';
import { MethodStats, PARTS, type CallWindow } from './method-stats.js';
import { endCallSpan, startCallSpan } from './otel.js';
import { ProcessStats, type ProcessSample } from './process-stats.js';
import { PublicationStats } from './publication-stats.js';
import { Counter, LabelledCounter, metrics } from './registry.js';
import { TraceStore } from './trace-store.js';
import { Trace, type TraceRecord } from './trace.js';
import { residentBytes } from './memory-usage.js';

/** Distinct method names and publication names kept apart; past it they share `(other)`. */
export const NAME_CAP = 500;
const SAMPLE_MS = 2000;
/** Samples kept for the dashboard's charts (5 minutes). */
const HISTORY = 150;

/** What the server tells the APM about its sessions when asked (sampled, never counted per message). */
export interface SessionFigures {
  sessions: number;
  /** Distinct logged-in users over the open sessions. */
  users: number;
  byTransport: Record<string, number>;
}

/**
 * One server's load as a cluster's balancer (or a workers' primary) knows it:
 * what each announces (cluster/load-monitor.ts), labelled by server.
 */
export interface ServerSummary {
  /** Its id in the cluster's registry, or `worker-<n>` for a primary's worker. */
  server: string;
  sessions: number;
  /** Percent of one core. */
  cpuPercent: number;
  /** Event-loop delay, ms. */
  lagMs: number;
  memoryMb: number;
  methodsPerSec: number;
  methodP95Ms: number;
}

/** A process's own figures without its calls (a workers' primary runs no app code). */
export type ProcessFigures = ApmReport['process'] & { pid: number; lagMaxLastMinute: number };

/** The longest event-loop delay of a process's samples of the last minute before `at` (and its latest), ms. */
export function longestDelayLastMinute(history: readonly HistoryPoint[], at: number, latest: number): number {
  return Math.max(latest, ...history.filter((p) => p.t > at - 60_000).map((p) => p.lagMax));
}

/** One point of the dashboard's charts. */
export interface HistoryPoint {
  t: number;
  cpu: number;
  rssMb: number;
  heapMb: number;
  lagP99: number;
  /** The longest event-loop delay over the interval, ms: a stall is one delay among a couple of hundred, under the p99. */
  lagMax: number;
  gcMs: number;
  sessions: number;
  /** Per second over the sample's interval. */
  methodsPerSec: number;
  subsPerSec: number;
  messagesInPerSec: number;
  docsReadPerSec: number;
  /** Method time percentiles over the interval, ms. */
  methodP50: number;
  methodP95: number;
  methodP99: number;
  readyP95: number;
}

export interface MethodReport {
  name: string;
  calls: number;
  errors: number;
  /** Since start. */
  time: HistogramData;
  /** Summed ms per part since start (PARTS order). */
  parts: number[];
  recent: CallWindow;
}

export interface PublicationReport {
  name: string;
  subs: number;
  unsubs: number;
  active: number;
  errors: number;
  ready: HistogramData;
  recentSubs: number;
  recentReady: HistogramData;
  lifetime: HistogramData;
  initialDocs: number;
  /** Encoded size of the `added` messages its cursors sent before ready. */
  initialBytes: number;
  /** Documents sent after ready, by kind (added, changed, removed), counted once per change and publication. */
  live: { added: number; changed: number; removed: number };
  /** Encoded size of those messages, by kind, over every subscriber. */
  liveBytes: { added: number; changed: number; removed: number };
  observersCreated: number;
  observersReused: number;
}

/** Everything one process knows, as data: what /perseid/apm answers and what a primary merges. */
export interface ApmReport {
  at: number;
  pid: number;
  worker?: string;
  uptimeSeconds: number;
  enabled: boolean;
  methods: MethodReport[];
  publications: PublicationReport[];
  liveQueries: {
    created: Record<LiveQueryStrategy, number>;
    active: Record<LiveQueryStrategy, number>;
    /** By change source kind (change-stream, oplog, polling, embedded, fanout). */
    createdBySource: Record<string, number>;
    activeBySource: Record<string, number>;
    lifetime: HistogramData;
  };
  database: {
    operations: Array<{ collection: string; op: string; count: number; errors: number; time: HistogramData }>;
    shapes: ShapeFigures[];
    commands: Array<{ name: string; count: number; failures: number; time: HistogramData }>;
  };
  process: ProcessSample & { cpuUserSeconds: number; cpuSystemSeconds: number; eventLoopDelay: HistogramData; gc: Record<string, HistogramData> };
  sessions: SessionFigures;
  /** Sessions opened since start, by transport (websocket, sockjs-websocket, sockjs-<polling kind>). */
  sessionsOpened: Record<string, number>;
  /** The flat counters and gauges of every layer (registry.ts). */
  /** A labelled counter's series each come with their `labels`. */
  counters: Array<{ name: string; help: string; kind: 'counter' | 'gauge'; value: number; labels?: Record<string, string> }>;
  history: HistoryPoint[];
  traces: TraceRecord[];
  errors: ErrorRecord[];
  overflowed: { methods: number; publications: number; shapes: number };
  /**
   * The process's cost with no session open: the lowest seen while it had none
   * (`measured`), else CPU 0 and the memory at the APM's start, so per-session
   * figures err high rather than low.
   */
  idle: { cpuPercent: number; rssMb: number; measured: boolean };
  /** Mean CPU (percent of one core) and open sessions over the last minute's samples. */
  lastMinute: { cpuPercent: number; sessions: number };
  /** Seconds the recent windows (methods' and publications' `recent`) cover: 30 to 60, less just after start. */
  recentSeconds: number;
}

/** PERSEID_APM: on (also when unset) or off; undefined for anything else, which `perseid start` refuses. */
export function apmSetting(raw: string | undefined): boolean | undefined {
  const value = (raw ?? '').trim().toLowerCase();
  if (value === '' || value === 'on') return true;
  return value === 'off' ? false : undefined;
}

export class Apm {
  enabled = apmSetting(process.env.PERSEID_APM) ?? true;
  readonly methods = new BoundedNames<MethodStats>(NAME_CAP, (name) => new MethodStats(name));
  readonly publications = new BoundedNames<PublicationStats>(NAME_CAP, (name) => new PublicationStats(name));
  readonly liveQueries = new LiveQueryStats();
  readonly database = new DatabaseStats();
  readonly process = new ProcessStats();
  readonly traces = new TraceStore();
  readonly errors = new ErrorStore();
  private readonly history: HistoryPoint[] = [];
  /** Transports are a fixed set (the SockJS protocol's names), so this stays small. */
  private readonly openedByTransport: Record<string, number> = {};
  private latest: ProcessSample | undefined;
  private sessionFigures: () => SessionFigures = () => ({ sessions: 0, users: 0, byTransport: {} });
  private timer: NodeJS.Timeout | undefined;
  private users = 0;
  private readonly started = Date.now();
  private idleCpu = Infinity;
  private idleRss = Infinity;
  private startRss = residentBytes() / (1024 * 1024);
  private lastCounters: Record<string, number> = {};
  private intervalMethods = new Histogram();
  private intervalReady = new Histogram();
  /** When the recent window began (the previous half's start) and when its current half began, ms since the epoch. */
  private recentSince = Date.now();
  private halfSince = this.recentSince;
  private jobsSummary: (() => Promise<unknown>) | undefined;

  /** Starts sampling the process (idempotent); the timer does not keep the process alive. */
  start(): void {
    if (!this.enabled || this.timer) return;
    this.process.start();
    this.startRss = residentBytes() / (1024 * 1024);
    this.latest = this.process.sample();
    this.lastCounters = metrics.snapshot();
    this.recentSince = this.halfSince = Date.now();
    let rotations = 0;
    this.timer = setInterval(() => {
      this.sample();
      // Windows of 30 s (the dashboard's "recent" is the last 30 to 60 s).
      if (++rotations % 15 === 0) this.rotate();
    }, SAMPLE_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.process.stop();
  }

  /** How the APM learns the server's sessions (the server registers itself). */
  sessionsFrom(figures: () => SessionFigures): void {
    this.sessionFigures = figures;
  }

  // ---- recording ----

  /** A new DDP session (not a resumed one) on `transport`. */
  sessionOpened(transport: string): void {
    if (this.enabled) this.openedByTransport[transport] = (this.openedByTransport[transport] ?? 0) + 1;
  }

  /** A method call begins (`arrived`: performance.now() when its message arrived); undefined when off. */
  methodStarted(name: string, arrived: number, session: string, userId: string | null): Trace | undefined {
    if (!this.enabled) return undefined;
    const trace = new Trace('method', this.methods.get(name).name, arrived);
    trace.span = startCallSpan('method', name, session, userId);
    return trace;
  }

  /** A method call ended; `clientError` when its error was meant for the client (a DDPError) rather than a failure. */
  methodEnded(trace: Trace | undefined, error?: unknown, clientError = false): void {
    if (!trace || trace.finished) return;
    trace.finish(error);
    const stats = this.methods.get(trace.name);
    stats.record(trace);
    this.intervalMethods.record(trace.total);
    this.traces.offer(trace, stats);
    if (error !== undefined) this.errors.add('method', trace.name, error, clientError, trace.record());
    endCallSpan(trace);
  }

  /** Time other messages of the connection waited behind this call (a method's figures add it; a subscription's trace keeps it). */
  waitedOn(trace: Trace | undefined, ms: number): void {
    if (!trace || ms <= 0) return;
    trace.waitedOn += ms;
    // By kind: a publication may share its name with a method.
    if (trace.kind === 'method') this.methods.peek(trace.name)?.waitedOn(ms);
  }

  subStarted(name: string, arrived: number, session: string, userId: string | null): Trace | undefined {
    if (!this.enabled) return undefined;
    const stats = this.publications.get(name);
    stats.subscribed();
    const trace = new Trace('sub', stats.name, arrived);
    trace.span = startCallSpan('sub', name, session, userId);
    return trace;
  }

  /** The subscription is ready (or failed, with `error`): its trace ends. */
  subReady(trace: Trace | undefined, initialDocs: number, error?: unknown, clientError = false): void {
    if (!trace || trace.finished) return;
    trace.finish(error);
    const stats = this.publications.get(trace.name);
    if (error !== undefined) {
      stats.failed();
      this.errors.add('sub', trace.name, error, clientError, trace.record());
    } else {
      stats.readyAfter(trace.total);
      stats.readyWith(initialDocs);
      this.intervalReady.record(trace.total);
    }
    this.traces.offer(trace, stats);
    endCallSpan(trace);
  }

  subStopped(trace: Trace | undefined, lifetimeMs: number): void {
    if (!trace) return;
    this.publications.get(trace.name).stopped(lifetimeMs);
    if (trace.finished) return;
    // Stopped before it was ready (the client gave up, or went away): its span ends here, saying so.
    trace.finish();
    trace.span?.setAttribute('perseid.subscription.ready', false);
    endCallSpan(trace);
  }

  /** Where a subscription's live queries count the changes they send it (undefined when not traced). */
  changeCounter(trace: Trace | undefined): PublicationStats | undefined {
    return trace && this.publications.get(trace.name);
  }

  observerAttached(trace: Trace | undefined, reused: boolean): void {
    if (!trace) return;
    this.publications.get(trace.name).observer(reused);
  }

  /** A server component failed outside any call. */
  serverError(component: string, error: unknown): void {
    if (this.enabled) this.errors.add('server', component, error, false);
  }

  // ---- reading ----

  private sample(): void {
    const sample = this.process.sample();
    this.latest = sample;
    const figures = this.sessionFigures();
    this.users = figures.users;
    const cpu = sample.cpuUser + sample.cpuSystem;
    if (figures.sessions === 0) {
      this.idleCpu = Math.min(this.idleCpu, cpu);
      this.idleRss = Math.min(this.idleRss, sample.rssMb);
    }
    const counters = metrics.snapshot();
    const rate = (name: string) => ((counters[name] ?? 0) - (this.lastCounters[name] ?? 0)) / (SAMPLE_MS / 1000);
    this.history.push({
      t: Date.now(),
      cpu,
      rssMb: sample.rssMb,
      heapMb: sample.heapUsedMb,
      lagP99: sample.lagP99,
      lagMax: sample.lagMax,
      gcMs: Object.values(sample.gcMs).reduce((a, b) => a + b, 0),
      sessions: figures.sessions,
      methodsPerSec: this.intervalMethods.count / (SAMPLE_MS / 1000),
      subsPerSec: rate('perseid_subscriptions_total'),
      messagesInPerSec: rate('perseid_messages_received_total'),
      docsReadPerSec: rate('perseid_live_query_documents_read_total'),
      methodP50: this.intervalMethods.percentile(50),
      methodP95: this.intervalMethods.percentile(95),
      methodP99: this.intervalMethods.percentile(99),
      readyP95: this.intervalReady.percentile(95),
    });
    if (this.history.length > HISTORY) this.history.shift();
    this.intervalMethods.reset();
    this.intervalReady.reset();
    this.lastCounters = counters;
  }

  /** Mean CPU and sessions over the last minute's samples (the latest sample's alone before the first). */
  private lastMinute(latest: ProcessSample): { cpuPercent: number; sessions: number } {
    const points = this.history.slice(-30);
    if (points.length === 0) return { cpuPercent: latest.cpuUser + latest.cpuSystem, sessions: this.sessionFigures().sessions };
    const mean = (f: (p: HistoryPoint) => number) => points.reduce((n, p) => n + f(p), 0) / points.length;
    return { cpuPercent: mean((p) => p.cpu), sessions: mean((p) => p.sessions) };
  }

  private rotate(): void {
    this.recentSince = this.halfSince;
    this.halfSince = Date.now();
    for (const stats of this.methods.values()) stats.rotate();
    for (const stats of this.publications.values()) stats.rotate();
  }

  /** This process's CPU, memory, event-loop delay and GC, as of the latest sample. */
  processFigures(latest: ProcessSample = this.latest ?? this.process.sample()): ApmReport['process'] {
    const gc: Record<string, HistogramData> = {};
    for (const [kind, histogram] of Object.entries(this.process.gc)) gc[kind] = histogram.data();
    return {
      ...latest,
      cpuUserSeconds: this.process.cpuUserSeconds,
      cpuSystemSeconds: this.process.cpuSystemSeconds,
      eventLoopDelay: this.process.eventLoopDelay.data(),
      gc,
    };
  }

  /** This process's own figures, as a workers' primary shows them beside its workers'. */
  ownFigures(): ProcessFigures {
    const figures = this.processFigures();
    return { pid: process.pid, ...figures, lagMaxLastMinute: longestDelayLastMinute(this.history, Date.now(), figures.lagMax) };
  }

  /** Everything this process knows. */
  report(): ApmReport {
    const latest = this.latest ?? this.process.sample();
    const report: ApmReport = {
      at: Date.now(),
      pid: process.pid,
      uptimeSeconds: Math.round((Date.now() - this.started) / 1000),
      enabled: this.enabled,
      methods: this.methods.values().map((m) => ({ name: m.name, calls: m.calls, errors: m.errors, time: m.time.total.data(), parts: Array.from(m.parts), recent: m.recent() })),
      publications: this.publications.values().map((p) => ({
        name: p.name,
        subs: p.subs,
        unsubs: p.unsubs,
        active: p.active,
        errors: p.errors,
        ready: p.ready.total.data(),
        recentSubs: p.recent().subs,
        recentReady: p.ready.recent().data(),
        lifetime: p.lifetime.data(),
        initialDocs: p.initialDocs,
        initialBytes: p.initialBytes,
        live: { added: p.liveAdded, changed: p.liveChanged, removed: p.liveRemoved },
        liveBytes: { added: p.liveAddedBytes, changed: p.liveChangedBytes, removed: p.liveRemovedBytes },
        observersCreated: p.observersCreated,
        observersReused: p.observersReused,
      })),
      liveQueries: {
        created: { ...this.liveQueries.created },
        active: { ...this.liveQueries.active },
        createdBySource: { ...this.liveQueries.createdBySource },
        activeBySource: { ...this.liveQueries.activeBySource },
        lifetime: this.liveQueries.lifetime.data(),
      },
      database: {
        operations: this.database.operations.values().map((o) => ({ collection: o.collection, op: o.op, count: o.count, errors: o.errors, time: o.time.data() })),
        shapes: this.database.shapes.values().map((s) => {
          const figures: ShapeFigures = {
            collection: s.collection,
            shape: s.shape,
            ops: s.ops,
            timeMs: s.timeMs,
            slow: s.slow,
            returned: s.returned,
            examined: s.examined,
            measuredOps: s.measuredOps,
            measuredReturned: s.measuredReturned,
            firstAt: s.firstAt,
            lastAt: s.lastAt,
          };
          if (s.plan) figures.plan = s.plan;
          return figures;
        }),
        commands: this.database.commands.values().map((c) => ({ name: c.name, count: c.count, failures: c.failures, time: c.time.data() })),
      },
      process: this.processFigures(latest),
      sessions: { ...this.sessionFigures(), users: this.users || this.sessionFigures().users },
      sessionsOpened: { ...this.openedByTransport },
      counters: metrics.list().flatMap((m) =>
        m instanceof LabelledCounter
          ? m.values().map((s) => ({ name: m.name, help: m.help, kind: 'counter' as const, value: s.value, labels: s.labels }))
          : [{ name: m.name, help: m.help, kind: m instanceof Counter ? ('counter' as const) : ('gauge' as const), value: m.get() }],
      ),
      history: [...this.history],
      traces: this.traces.recent(),
      errors: this.errors.recent(),
      overflowed: { methods: this.methods.overflowed, publications: this.publications.overflowed, shapes: this.database.shapes.overflowed },
      idle: Number.isFinite(this.idleRss) ? { cpuPercent: this.idleCpu, rssMb: this.idleRss, measured: true } : { cpuPercent: 0, rssMb: this.startRss, measured: false },
      lastMinute: this.lastMinute(latest),
      recentSeconds: (Date.now() - this.recentSince) / 1000,
    };
    if (process.env.PERSEID_WORKER_ID !== undefined) report.worker = process.env.PERSEID_WORKER_ID;
    return report;
  }

  /** Where the dashboard's jobs summary comes from (the jobs layer registers it when it starts). */
  jobsFrom(summary: (() => Promise<unknown>) | undefined): void {
    this.jobsSummary = summary;
  }

  /** This process's snapshot (what /perseid/apm answers). */
  async snapshot(): Promise<ApmSnapshot> {
    const report = this.report();
    const indexes: ApmSnapshot['indexes'] = {};
    const collections = [...new Set(report.database.shapes.map((s) => s.collection))];
    await Promise.all(collections.map(async (c) => (indexes[c] = await this.database.indexes(c))));
    const out: ApmSnapshot = { reports: [report], indexes, indexUse: this.database.indexUse };
    if (this.jobsSummary) out.jobs = await this.jobsSummary().catch((error: unknown) => ({ error: error instanceof Error ? error.message : String(error) }));
    return out;
  }

  /** Forgets every figure (tests). */
  reset(): void {
    this.methods.clear();
    this.publications.clear();
    this.database.shapes.clear();
    this.database.operations.clear();
    this.database.commands.clear();
    this.traces.clear();
    this.errors.clear();
    this.history.length = 0;
    this.idleCpu = this.idleRss = Infinity;
    this.recentSince = this.halfSince = Date.now();
  }
}

/** What one process answers at /perseid/apm: its report, the indexes of the collections its queries ran on, and the jobs summary when it runs jobs. */
export interface ApmSnapshot {
  reports: ApmReport[];
  indexes: Record<string, IndexDescription[] | undefined>;
  /** What the database's indexes serve (absent: anything, as MongoDB's). */
  indexUse?: IndexUse;
  jobs?: unknown;
  /** Every server's load, when this process balances a cluster or is a workers' primary. */
  servers?: ServerSummary[];
  /** This server's id in the cluster's registry, when it is a member: the other figures are its own, not the cluster's. */
  server?: string;
  /** A workers' primary's own process figures (its workers' are in `reports`). */
  primary?: ProcessFigures;
}

/** Index advice over one or more processes' reports (a machine's workers share a database). */
export function adviceFor(snapshot: ApmSnapshot): IndexAdvice[] {
  return adviseIndexes(
    mergeShapes(snapshot.reports.flatMap((r) => r.database.shapes)),
    snapshot.indexes,
    DEFAULT_ADVISOR_OPTIONS,
    snapshot.indexUse,
    Math.max(0, ...snapshot.reports.map((r) => r.at)),
  );
}

/**
 * The capacity report over one or more processes' reports; a workers' primary's CPU counts too (it follows the
 * database for its workers, work their sessions cause), as of its latest sample, with no idle cost taken off.
 */
export function capacityFor(snapshot: Pick<ApmSnapshot, 'reports' | 'primary'>, target?: CapacityTarget): CapacityReport {
  const { reports, primary } = snapshot;
  const sum = (f: (r: ApmReport) => number) => reports.reduce((n, r) => n + f(r), 0);
  return capacityReport(
    {
      processes: reports.length,
      sessions: sum((r) => r.sessions.sessions),
      sessionsLastMinute: sum((r) => r.lastMinute.sessions),
      users: sum((r) => r.sessions.users),
      cpuPercent: sum((r) => r.lastMinute.cpuPercent) + (primary ? primary.cpuUser + primary.cpuSystem : 0),
      idleMeasured: reports.every((r) => r.idle.measured),
      idleCpuPercent: sum((r) => r.idle.cpuPercent),
      rssMb: sum((r) => r.process.rssMb),
      idleRssMb: sum((r) => r.idle.rssMb),
      utilization: Math.max(0, ...reports.map((r) => r.process.utilization)),
      lagP99Ms: Math.max(0, ...reports.map((r) => r.process.lagP99)),
    },
    target,
  );
}

export { PARTS };

/** The process's APM. */
export const apm = new Apm();
