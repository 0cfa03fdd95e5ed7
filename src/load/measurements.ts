/**
 * Latencies per named measure in HDR histograms (microsecond resolution, three
 * significant digits), overall and per second of the run, plus errors by kind.
 */
import { build, decodeFromCompressedBase64, encodeIntoCompressedBase64, type Histogram } from 'hdr-histogram-js';

export interface LatencySummary {
  count: number;
  /** Milliseconds. */
  p50: number;
  p95: number;
  p99: number;
  max: number;
  mean: number;
}

export interface TimelinePoint {
  /** Seconds since the start. */
  t: number;
  active: number;
  started: number;
  completed: number;
  errors: number;
  measures: Record<string, { count: number; p50: number; p99: number }>;
}

function histogram(digits: 1 | 2 | 3): Histogram {
  return build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: digits, autoResize: true });
}

const ms = (micros: number) => Math.round(micros) / 1000;

export function summarize(h: Histogram): LatencySummary {
  if (h.totalCount === 0) return { count: 0, p50: NaN, p95: NaN, p99: NaN, max: NaN, mean: NaN };
  // A percentile is the top of its bucket (up to 0.1 % above the values in it): never above the largest value recorded.
  const at = (percentile: number) => ms(Math.min(h.getValueAtPercentile(percentile), h.maxValue));
  return { count: h.totalCount, p50: at(50), p95: at(95), p99: at(99), max: ms(h.maxValue), mean: ms(h.mean) };
}

/** Measurements of one generator process, to be merged into another's (`perseid load --processes`). */
export interface EncodedMeasurements {
  overall: Record<string, string>;
  seconds: Array<{ started: number; completed: number; errors: number; active: number; measures: Record<string, string> }>;
  errors: Record<string, number>;
}

function encodeAll(histograms: Map<string, Histogram>): Record<string, string> {
  return Object.fromEntries([...histograms].map(([name, h]) => [name, encodeIntoCompressedBase64(h)]));
}

function addAll(into: Map<string, Histogram>, encoded: Record<string, string>, digits: 1 | 2 | 3): void {
  for (const [name, text] of Object.entries(encoded)) {
    let h = into.get(name);
    if (!h) into.set(name, (h = histogram(digits)));
    h.add(decodeFromCompressedBase64(text));
  }
}

interface Second {
  started: number;
  completed: number;
  errors: number;
  active: number;
  measures: Map<string, Histogram>;
}

export class Measurements {
  private readonly overall = new Map<string, Histogram>();
  private readonly seconds: Second[] = [];
  readonly errors = new Map<string, number>();

  constructor(private readonly t0: number) {}

  private second(at: number): Second {
    const index = Math.max(0, Math.floor((at - this.t0) / 1000));
    while (this.seconds.length <= index) this.seconds.push({ started: 0, completed: 0, errors: 0, active: 0, measures: new Map() });
    return this.seconds[index]!;
  }

  /** Records one timing of `name`, in milliseconds, finished at time `at`. */
  record(name: string, milliseconds: number, at = performance.now()): void {
    const micros = Math.max(1, Math.round(milliseconds * 1000));
    let all = this.overall.get(name);
    if (!all) this.overall.set(name, (all = histogram(3)));
    all.recordValue(micros);
    const second = this.second(at);
    let h = second.measures.get(name);
    if (!h) second.measures.set(name, (h = histogram(2)));
    h.recordValue(micros);
  }

  error(kind: string, at = performance.now()): void {
    this.errors.set(kind, (this.errors.get(kind) ?? 0) + 1);
    this.second(at).errors++;
  }

  userStarted(at = performance.now()): void {
    this.second(at).started++;
  }

  userCompleted(at = performance.now()): void {
    this.second(at).completed++;
  }

  /** Notes how many users are running at `at` (the highest in each second is kept). */
  active(count: number, at = performance.now()): void {
    const second = this.second(at);
    second.active = Math.max(second.active, count);
  }

  encode(): EncodedMeasurements {
    return {
      overall: encodeAll(this.overall),
      seconds: this.seconds.map((s) => ({ started: s.started, completed: s.completed, errors: s.errors, active: s.active, measures: encodeAll(s.measures) })),
      errors: Object.fromEntries(this.errors),
    };
  }

  /** Adds another process's measurements (its seconds counted from the same start). */
  merge(other: EncodedMeasurements): void {
    addAll(this.overall, other.overall, 3);
    other.seconds.forEach((s, index) => {
      const second = this.second(this.t0 + index * 1000);
      second.started += s.started;
      second.completed += s.completed;
      second.errors += s.errors;
      second.active += s.active;
      addAll(second.measures, s.measures, 2);
    });
    for (const [kind, n] of Object.entries(other.errors)) this.errors.set(kind, (this.errors.get(kind) ?? 0) + n);
  }

  summaries(): Record<string, LatencySummary> {
    const out: Record<string, LatencySummary> = {};
    for (const [name, h] of this.overall) out[name] = summarize(h);
    return out;
  }

  /** The measure recorded most often apart from connecting: what the progress line follows. Cheap (no percentiles). */
  busiest(): string {
    let best = 'connect';
    let most = 0;
    for (const [name, h] of this.overall) {
      if (name !== 'connect' && h.totalCount > most) [best, most] = [name, h.totalCount];
    }
    return best;
  }

  /** The latest value of a measure's p99 over the last second that has it (for the progress line). */
  recentP99(name: string): number {
    for (let i = this.seconds.length - 1; i >= Math.max(0, this.seconds.length - 3); i--) {
      const h = this.seconds[i]!.measures.get(name);
      if (h && h.totalCount > 0) return ms(h.getValueAtPercentile(99));
    }
    return NaN;
  }

  timeline(): TimelinePoint[] {
    return this.seconds.map((s, t) => {
      const measures: TimelinePoint['measures'] = {};
      for (const [name, h] of s.measures) measures[name] = { count: h.totalCount, p50: ms(h.getValueAtPercentile(50)), p99: ms(h.getValueAtPercentile(99)) };
      return { t, active: s.active, started: s.started, completed: s.completed, errors: s.errors, measures };
    });
  }
}
