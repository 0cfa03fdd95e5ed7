/**
 * The slowest call per name of each of the last few minutes (Kadira kept the
 * slowest trace per name per minute): what a person opens to learn why one
 * call took 2 s. Bounded: names are already capped (bounded-names.ts), and
 * each minute keeps one trace per name.
 */
import type { Trace, TraceRecord } from './trace.js';

const MINUTE = 60000;

export class TraceStore {
  /** Minute number → slowest trace per method or publication (keyed by its figures' object: no key text built per call). */
  private readonly minutes = new Map<number, Map<object, Trace>>();

  constructor(private readonly keepMinutes = 5) {}

  /** `key`: the object standing for the trace's method or publication (one per name). */
  offer(trace: Trace, key: object): void {
    const minute = Math.floor(Date.now() / MINUTE);
    let slowest = this.minutes.get(minute);
    if (!slowest) {
      slowest = new Map();
      this.minutes.set(minute, slowest);
      for (const old of this.minutes.keys()) if (old <= minute - this.keepMinutes) this.minutes.delete(old);
    }
    const held = slowest.get(key);
    if (!held || trace.total > held.total) slowest.set(key, trace);
  }

  /** The slowest trace per name over the kept minutes, slowest first. */
  recent(limit = 50): TraceRecord[] {
    const since = Math.floor(Date.now() / MINUTE) - this.keepMinutes;
    const best = new Map<object, Trace>();
    for (const [minute, slowest] of this.minutes) {
      if (minute <= since) continue;
      for (const [key, trace] of slowest) {
        const held = best.get(key);
        if (!held || trace.total > held.total) best.set(key, trace);
      }
    }
    return [...best.values()]
      .sort((a, b) => b.total - a.total)
      .slice(0, limit)
      .map((t) => t.record());
  }

  clear(): void {
    this.minutes.clear();
  }
}
