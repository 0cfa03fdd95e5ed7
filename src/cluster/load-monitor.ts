/**
 * How loaded this process is: open sessions, CPU, event-loop delay, memory,
 * the p95 method time and methods per second, announced to discovery for
 * choosing where new clients go, for the autoscaler, and for every server's
 * summary in a balancer's /metrics.
 */
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import type { ServerSummary } from '../metrics/apm.js';
import { methodTimes } from '../server/server-metrics.js';
import { residentBytes } from '../metrics/memory-usage.js';

const RESOLUTION_MS = 20;
/** CPU and lag are averaged over about this long whatever the sampling interval, so one busy moment (a GC pause, a burst) does not look like a busy server. */
const SMOOTHING_MS = 2000;

export interface LoadFigures {
  sessions: number;
  /** Event-loop delay beyond the timer's resolution (p99 of each window, averaged), milliseconds. */
  lagMs: number;
  /** CPU time used, percent of one core, averaged over the last few seconds. */
  cpuPercent: number;
  /** Resident memory, MiB. */
  memoryMb: number;
  /** 95th percentile of method times since the last announcement, ms (0 without calls). */
  methodP95Ms: number;
  /** Method calls per second since the last announcement (absent from older servers). */
  methodsPerSec?: number;
}

export class LoadMonitor {
  private readonly delay: IntervalHistogram;
  private cpu = process.cpuUsage();
  private at = performance.now();
  private cpuPercent: number | undefined;
  private lagMs: number | undefined;

  constructor(private readonly sessions: () => number) {
    this.delay = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    this.delay.enable();
  }

  /** The figures since the last call. */
  sample(): LoadFigures {
    // The histogram records whole timer intervals, so an idle loop shows the resolution itself.
    const lagMs = this.delay.count > 0 ? Math.max(0, this.delay.percentile(99) / 1e6 - RESOLUTION_MS) : 0;
    this.delay.reset();
    const now = performance.now();
    const used = process.cpuUsage(this.cpu);
    const elapsed = now - this.at;
    const calls = methodTimes.count;
    if (elapsed > 0) {
      const weight = 1 - Math.exp(-elapsed / SMOOTHING_MS);
      const smooth = (average: number | undefined, sample: number) => (average === undefined ? sample : average + weight * (sample - average));
      this.cpuPercent = smooth(this.cpuPercent, ((used.user + used.system) / 1000 / elapsed) * 100);
      this.lagMs = smooth(this.lagMs, lagMs);
    }
    this.cpu = process.cpuUsage();
    this.at = now;
    return {
      sessions: this.sessions(),
      lagMs: Math.round((this.lagMs ?? 0) * 10) / 10,
      cpuPercent: Math.round(this.cpuPercent ?? 0),
      memoryMb: Math.round(residentBytes() / 1048576),
      methodP95Ms: Math.round(methodTimes.takePercentile(95) * 10) / 10,
      methodsPerSec: elapsed > 0 ? Math.round((calls / elapsed) * 10000) / 10 : 0,
    };
  }

  stop(): void {
    this.delay.disable();
  }
}

/**
 * Lower is better: open sessions, with a nearly saturated CPU or a slow event
 * loop counting as more (a saturated process is full however few sessions it
 * has). Below that, CPU says little about capacity, and counting it would let
 * a passing burst of work send every new client elsewhere.
 */
export function loadScore(load: LoadFigures): number {
  return load.sessions + Math.max(0, load.cpuPercent - 75) * 2 + Math.max(0, load.lagMs - 20) * 10;
}

/** A server's (or worker's) load figures as the APM shows them, labelled `server`. */
export function serverSummary(server: string, load: LoadFigures): ServerSummary {
  return {
    server,
    sessions: load.sessions,
    cpuPercent: load.cpuPercent,
    lagMs: load.lagMs,
    // Servers of the first clustered release announced neither memory nor method times (their entries lack them).
    memoryMb: load.memoryMb ?? 0,
    methodsPerSec: load.methodsPerSec ?? 0,
    methodP95Ms: load.methodP95Ms ?? 0,
  };
}
