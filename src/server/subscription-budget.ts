/**
 * Subscriptions held over every connection of the server, bounded: each
 * holds its documents' copies for its connection, and the limits per
 * connection and per address still let many addresses (or one, with many
 * connections) hold enough to exhaust the heap. Past the limit a new
 * subscription is refused, to be tried again; the process lives on.
 */
import { getHeapStatistics } from 'node:v8';
import type { Logger } from '../log.js';
import { RefusalLog } from '../refusal-log.js';

/** A subscription of 100 small documents holds ~2.7 KB: 8 KiB each leaves the heap room for everything else. */
export function defaultTotalSubscriptions(): number {
  return Math.max(1000, Math.floor(getHeapStatistics().heap_size_limit / 8192));
}

export class SubscriptionBudget {
  private held = 0;
  private readonly refusals: RefusalLog;

  constructor(
    readonly limit: number,
    log: Logger,
  ) {
    this.refusals = new RefusalLog(log, 'refusing subscriptions: the server holds as many as it may (raise --max-total-subscriptions, or add servers)');
  }

  /** Takes a place for a new subscription; false (and a warning at most once a minute) when none is left. */
  take(): boolean {
    if (this.held >= this.limit) {
      this.refusals.refusedOne({ limit: this.limit });
      return false;
    }
    this.held++;
    return true;
  }

  release(count = 1): void {
    this.held -= count;
  }
}
