/**
 * Live queries as the APM sees them, beyond the flat counters of
 * reactive/reactive-metrics.ts: how many were started per strategy (set,
 * window, requery) and per change source (change-stream, oplog, polling,
 * embedded, fanout: a fixed set, named by the data layer), and how long they lived.
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
  /** Started and running now, per change source kind. */
  readonly createdBySource: Record<string, number> = {};
  readonly activeBySource: Record<string, number> = {};

  started(strategy: LiveQueryStrategy, source: string): void {
    this.created[strategy]++;
    this.active[strategy]++;
    this.createdBySource[source] = (this.createdBySource[source] ?? 0) + 1;
    this.activeBySource[source] = (this.activeBySource[source] ?? 0) + 1;
  }

  stopped(strategy: LiveQueryStrategy, source: string, lifetimeMs: number): void {
    this.active[strategy]--;
    this.activeBySource[source] = (this.activeBySource[source] ?? 0) - 1;
    this.lifetime.record(lifetimeMs);
  }
}
