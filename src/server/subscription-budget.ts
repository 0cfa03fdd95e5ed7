/**
 * Subscriptions held over every connection of the server, bounded: each
 * holds its documents' copies for its connection, and the limits per
 * connection and per address still let many addresses (or one, with many
 * connections) hold enough to exhaust the heap. Past the limit a new
 * subscription is refused, to be tried again; the process lives on.
 */
import { getHeapStatistics } from 'node:v8';
import type { Logger } from '../log.js';

/** A subscription of 100 small documents holds ~2.7 KB: 8 KiB each leaves the heap room for everything else. */
export function defaultTotalSubscriptions(): number {
  return Math.max(1000, Math.floor(getHeapStatistics().heap_size_limit / 8192));
}

export class SubscriptionBudget {
  private held = 0;
  private refusedSinceWarning = 0;
  private lastWarning = -Infinity;

  constructor(
    readonly limit: number,
    private readonly log: Logger,
  ) {}

  /** Takes a place for a new subscription; false (and a warning at most once a minute) when none is left. */
  take(): boolean {
    if (this.held < this.limit) {
      this.held++;
      return true;
    }
    this.refusedSinceWarning++;
    const now = performance.now();
    if (now - this.lastWarning >= 60_000) {
      this.log.warn('refusing subscriptions: the server holds as many as it may (raise --max-total-subscriptions, or add servers)', { limit: this.limit, refused: this.refusedSinceWarning });
      this.refusedSinceWarning = 0;
      this.lastWarning = now;
    }
    return false;
  }

  release(count = 1): void {
    this.held -= count;
  }

  get count(): number {
    return this.held;
  }
}
