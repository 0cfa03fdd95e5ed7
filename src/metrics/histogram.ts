/**
 * A latency histogram with fixed buckets: recording is a binary search over
 * 70 bounds and one increment, so it can stay on for every call. Bounds run
 * from 0.01 ms to 75 s, ten per decade (1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6,
 * 7.5), so a percentile read from it is within a bucket's width (at most 25
 * %), and Prometheus's conventional bounds (1 ms, 2.5 ms, 5 ms, 10 ms, ...)
 * are among them: the exported buckets are exact sums of these.
 * Histograms of the same bounds add and subtract, so windows are differences
 * of totals and workers' histograms merge exactly.
 * Hand-written: prom-client's Histogram hashes its labels on every observation
 * and cannot be read back as a distribution; HDR is more than latency needs.
 */

const STEPS = [1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 7.5];

/** Upper bounds in ms of every bucket but the last (which holds everything above). */
export const BOUNDS_MS: readonly number[] = (() => {
  const out: number[] = [];
  for (let exponent = -2; exponent <= 4; exponent++) for (const step of STEPS) out.push(Number((step * 10 ** exponent).toPrecision(3)));
  return out;
})();

/** Prometheus bucket bounds, in seconds (each one of BOUNDS_MS / 1000). */
export const PROMETHEUS_BOUNDS_SECONDS: readonly number[] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** The index of the bucket `ms` falls in (first bound >= ms). */
function bucketOf(ms: number): number {
  let lo = 0;
  let hi = BOUNDS_MS.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (BOUNDS_MS[mid]! < ms) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** What a histogram is as data: for reports, IPC and merging. */
export interface HistogramData {
  /** One count per bucket (BOUNDS_MS.length + 1); trailing zeros may be omitted. */
  counts: number[];
  count: number;
  /** Sum of the recorded values, ms. */
  sum: number;
  max: number;
}

export class Histogram {
  readonly counts = new Float64Array(BOUNDS_MS.length + 1);
  count = 0;
  sum = 0;
  max = 0;

  record(ms: number): void {
    const value = ms > 0 ? ms : 0;
    this.counts[bucketOf(value)]!++;
    this.count++;
    this.sum += value;
    if (value > this.max) this.max = value;
  }

  reset(): void {
    this.counts.fill(0);
    this.count = 0;
    this.sum = 0;
    this.max = 0;
  }

  /** Adds `other` into this one. */
  add(other: Histogram | HistogramData): this {
    const counts = other.counts;
    for (let i = 0; i < counts.length; i++) this.counts[i]! += counts[i]!;
    this.count += other.count;
    this.sum += other.sum;
    if (other.max > this.max) this.max = other.max;
    return this;
  }

  /** `p` (0-100) percentile in ms, interpolated within its bucket; 0 when empty. */
  percentile(p: number): number {
    if (this.count === 0) return 0;
    const rank = Math.max(1, Math.ceil((p / 100) * this.count));
    let seen = 0;
    for (let i = 0; i < this.counts.length; i++) {
      const n = this.counts[i]!;
      if (n === 0) continue;
      if (seen + n >= rank) {
        const lower = i === 0 ? 0 : BOUNDS_MS[i - 1]!;
        const upper = Math.min(i < BOUNDS_MS.length ? BOUNDS_MS[i]! : this.max, this.max);
        return lower + ((upper - lower) * (rank - seen)) / n;
      }
      seen += n;
    }
    return this.max;
  }

  get mean(): number {
    return this.count === 0 ? 0 : this.sum / this.count;
  }

  /** Recorded values at most `boundMs` (a value of BOUNDS_MS). */
  countAtMost(boundMs: number): number {
    const last = bucketOf(boundMs);
    let n = 0;
    for (let i = 0; i <= last && i < this.counts.length; i++) n += this.counts[i]!;
    return n;
  }

  data(): HistogramData {
    let used = this.counts.length;
    while (used > 0 && this.counts[used - 1] === 0) used--;
    return { counts: Array.from(this.counts.subarray(0, used)), count: this.count, sum: this.sum, max: this.max };
  }

  static from(data: HistogramData): Histogram {
    return new Histogram().add(data);
  }
}

/**
 * A histogram of everything recorded plus a recent window: the total feeds
 * Prometheus (cumulative), the window the dashboard's "last minute" (the
 * current and the previous half, rotated every 30 s by the APM's sampler).
 */
export class WindowedHistogram {
  readonly total = new Histogram();
  private current = new Histogram();
  private previous = new Histogram();

  record(ms: number): void {
    this.total.record(ms);
    this.current.record(ms);
  }

  rotate(): void {
    const recycled = this.previous;
    recycled.reset();
    this.previous = this.current;
    this.current = recycled;
  }

  /** The last 30 to 60 seconds. */
  recent(): Histogram {
    return new Histogram().add(this.previous).add(this.current);
  }
}
