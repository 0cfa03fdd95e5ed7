/**
 * What the APM keeps per method: calls, errors, the latency histogram, and
 * the summed breakdown of every call (wait, db, async, compute, and the time
 * it held others back), both since start (for Prometheus) and for the recent
 * window (for the dashboard), rotated with the histogram's window.
 */
import { WindowedHistogram, type HistogramData } from './histogram.js';
import type { Trace } from './trace.js';

export const PARTS = ['wait', 'db', 'async', 'compute', 'waitedOn'] as const;
export type Part = (typeof PARTS)[number];

/** The recent window of a method as data: what reports carry and merge. */
export interface CallWindow {
  calls: number;
  errors: number;
  time: HistogramData;
  /** Summed ms per part, in PARTS order. */
  parts: number[];
}

export class MethodStats {
  calls = 0;
  errors = 0;
  readonly time = new WindowedHistogram();
  /** Summed ms per part since start, in PARTS order. */
  readonly parts = new Float64Array(PARTS.length);
  private current = { calls: 0, errors: 0, parts: new Float64Array(PARTS.length) };
  private previous = { calls: 0, errors: 0, parts: new Float64Array(PARTS.length) };

  constructor(readonly name: string) {}

  /** Counts a finished call (its waitedOn comes later, see `waitedOn`). */
  record(trace: Trace): void {
    this.calls++;
    this.current.calls++;
    if (trace.error) {
      this.errors++;
      this.current.errors++;
    }
    this.time.record(trace.total);
    this.add(0, trace.wait);
    this.add(1, trace.db);
    this.add(2, trace.async);
    this.add(3, trace.compute);
  }

  waitedOn(ms: number): void {
    this.add(4, ms);
  }

  rotate(): void {
    this.time.rotate();
    const recycled = this.previous;
    recycled.calls = 0;
    recycled.errors = 0;
    recycled.parts.fill(0);
    this.previous = this.current;
    this.current = recycled;
  }

  recent(): CallWindow {
    const parts = PARTS.map((_, i) => this.current.parts[i]! + this.previous.parts[i]!);
    return { calls: this.current.calls + this.previous.calls, errors: this.current.errors + this.previous.errors, time: this.time.recent().data(), parts };
  }

  private add(part: number, ms: number): void {
    this.parts[part]! += ms;
    this.current.parts[part]! += ms;
  }
}
