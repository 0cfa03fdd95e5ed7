/**
 * The process's own figures: CPU (user and system), memory (RSS, heap),
 * event-loop delay (perf_hooks' monitorEventLoopDelay, folded into a
 * histogram at each sample), event-loop utilisation, and garbage collection
 * pauses by kind (a PerformanceObserver on `gc` entries). Started by the APM,
 * sampled by it every couple of seconds.
 */
import { constants, monitorEventLoopDelay, performance, PerformanceObserver, type EventLoopUtilization, type IntervalHistogram } from 'node:perf_hooks';
import { BOUNDS_MS, Histogram } from './histogram.js';
import { memoryUsage } from './memory-usage.js';

export const GC_KINDS = ['minor', 'major', 'incremental', 'weakcb'] as const;
export type GcKind = (typeof GC_KINDS)[number];

const KIND_OF: Record<number, GcKind> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};

/** The delay monitor's timer; what it records includes this interval, which is taken off. */
const RESOLUTION_MS = 10;

export interface ProcessSample {
  /** CPU over the sample's interval, percent of one core. */
  cpuUser: number;
  cpuSystem: number;
  rssMb: number;
  heapUsedMb: number;
  heapTotalMb: number;
  externalMb: number;
  /** Event-loop delay over the interval, ms. */
  lagP50: number;
  lagP99: number;
  lagMax: number;
  /** Share of the interval the event loop was busy (0-1). */
  utilization: number;
  /** GC pause time over the interval per kind, ms. */
  gcMs: Record<GcKind, number>;
}

const MB = 1024 * 1024;

export class ProcessStats {
  /** GC pauses since start, per kind (ms). */
  readonly gc: Record<GcKind, Histogram> = { minor: new Histogram(), major: new Histogram(), incremental: new Histogram(), weakcb: new Histogram() };
  /** Event-loop delays since start (ms). */
  readonly eventLoopDelay = new Histogram();
  /** CPU seconds used since the process started. */
  cpuUserSeconds = 0;
  cpuSystemSeconds = 0;
  private readonly gcWindow: Record<GcKind, number> = { minor: 0, major: 0, incremental: 0, weakcb: 0 };
  private monitor: IntervalHistogram | undefined;
  private observer: PerformanceObserver | undefined;
  private lastCpu = process.cpuUsage();
  private lastAt = performance.now();
  private lastElu: EventLoopUtilization = performance.eventLoopUtilization();

  start(): void {
    if (this.monitor) return;
    this.monitor = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    this.monitor.enable();
    this.observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        const kind = KIND_OF[((entry as { detail?: unknown }).detail as { kind?: number } | undefined)?.kind ?? -1];
        if (!kind) continue;
        this.gc[kind].record(entry.duration);
        this.gcWindow[kind] += entry.duration;
      }
    });
    this.observer.observe({ entryTypes: ['gc'] });
    this.lastCpu = process.cpuUsage();
    this.lastAt = performance.now();
    this.lastElu = performance.eventLoopUtilization();
  }

  stop(): void {
    this.monitor?.disable();
    this.monitor = undefined;
    this.observer?.disconnect();
    this.observer = undefined;
  }

  /** The figures since the previous sample. */
  sample(): ProcessSample {
    const now = performance.now();
    const elapsedMs = Math.max(1, now - this.lastAt);
    const cpu = process.cpuUsage(this.lastCpu);
    this.lastCpu = process.cpuUsage();
    this.lastAt = now;
    this.cpuUserSeconds = this.lastCpu.user / 1e6;
    this.cpuSystemSeconds = this.lastCpu.system / 1e6;
    const elu = performance.eventLoopUtilization(this.lastElu);
    this.lastElu = performance.eventLoopUtilization();
    const memory = memoryUsage();
    const lag = this.foldDelays();
    const gcMs = { ...this.gcWindow };
    for (const kind of GC_KINDS) this.gcWindow[kind] = 0;
    return {
      cpuUser: (cpu.user / 1000 / elapsedMs) * 100,
      cpuSystem: (cpu.system / 1000 / elapsedMs) * 100,
      rssMb: memory.rss / MB,
      heapUsedMb: memory.heapUsed / MB,
      heapTotalMb: memory.heapTotal / MB,
      externalMb: memory.external / MB,
      lagP50: lag.percentile(50),
      lagP99: lag.percentile(99),
      lagMax: lag.max,
      utilization: elu.utilization,
      gcMs,
    };
  }

  /**
   * Moves the monitor's delays since the last sample into `eventLoopDelay`
   * and returns them as a histogram of their own. The monitor keeps an HDR
   * histogram readable only as percentiles; bucket counts come from where its
   * percentiles fall between our bounds.
   */
  private foldDelays(): Histogram {
    const window = new Histogram();
    const monitor = this.monitor;
    if (!monitor || monitor.count === 0) return window;
    const n = monitor.count;
    const points = [...monitor.percentiles].map(([p, ns]) => [p, Math.max(0, ns / 1e6 - RESOLUTION_MS)] as const).sort((a, b) => a[0] - b[0]);
    let reached = 0;
    let point = 0;
    let share = 0;
    for (let i = 0; i <= BOUNDS_MS.length; i++) {
      const bound = i < BOUNDS_MS.length ? BOUNDS_MS[i]! : Infinity;
      while (point < points.length && points[point]![1] <= bound) share = points[point++]![0];
      const cumulative = i === BOUNDS_MS.length ? n : Math.round((share / 100) * n);
      window.counts[i] = Math.max(0, cumulative - reached);
      reached = Math.max(reached, cumulative);
    }
    window.count = n;
    window.max = Math.max(0, monitor.max / 1e6 - RESOLUTION_MS);
    window.sum = Math.max(0, monitor.mean / 1e6 - RESOLUTION_MS) * n;
    monitor.reset();
    this.eventLoopDelay.add(window);
    return window;
  }
}
