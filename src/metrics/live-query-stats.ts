/**
 * Live queries as the APM sees them, beyond the flat counters of
 * reactive/reactive-metrics.ts: how many were started per strategy (set,
 * window, requery) and how long they lived.
 */
import { Histogram } from './histogram.js';

export type ChangeKind = 'added' | 'changed' | 'removed';
export type LiveQueryStrategy = 'set' | 'window' | 'requery';

export const STRATEGIES: readonly LiveQueryStrategy[] = ['set', 'window', 'requery'];

export class LiveQueryStats {
  readonly created: Record<LiveQueryStrategy, number> = { set: 0, window: 0, requery: 0 };
  readonly active: Record<LiveQueryStrategy, number> = { set: 0, window: 0, requery: 0 };
  /** Lifetime of stopped live queries, ms. */
  readonly lifetime = new Histogram();

  started(strategy: LiveQueryStrategy): void {
    this.created[strategy]++;
    this.active[strategy]++;
  }

  stopped(strategy: LiveQueryStrategy, lifetimeMs: number): void {
    this.active[strategy]--;
    this.lifetime.record(lifetimeMs);
  }
}
