/**
 * Durations seen since the last look, for a percentile per window (the p95
 * method time a server announces to discovery, for the autoscaler). Keeps at
 * most `capacity` samples per window, a uniform random sample of all seen
 * (reservoir sampling), so memory stays bounded under any call rate.
 * Hand-written: a windowed reservoir is a few lines; a histogram library
 * would keep every window's buckets.
 */
export class RecentTimes {
  private samples: number[] = [];
  private seen = 0;

  constructor(private readonly capacity = 1024) {}

  record(ms: number): void {
    this.seen++;
    if (this.samples.length < this.capacity) this.samples.push(ms);
    else {
      const slot = Math.floor(Math.random() * this.seen);
      if (slot < this.capacity) this.samples[slot] = ms;
    }
  }

  /** Durations recorded since the last `takePercentile` (all of them, not only the sample kept). */
  get count(): number {
    return this.seen;
  }

  /** The `p`th percentile (0-100) of the durations since the last call, 0 when there were none; starts a new window. */
  takePercentile(p: number): number {
    const sorted = this.samples.sort((a, b) => a - b);
    const value = sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
    this.samples = [];
    this.seen = 0;
    return value;
  }
}
