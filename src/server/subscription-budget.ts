/**
 * Subscriptions held over every connection of the server, bounded: each
 * holds its documents' copies for its connection, and the limits per
 * connection and per address still let many addresses (or one, with many
 * connections) hold enough to exhaust the heap. Past the limit a new
 * subscription is refused, to be tried again; the process lives on. One
 * client address (an IPv6 /64) may hold at most half of it, so that one
 * client cannot fill it and have every other one refused.
 */
import { getHeapStatistics } from 'node:v8';
import type { Logger } from '../log.js';
import { RefusalLog } from '../refusal-log.js';

/** A subscription of 100 small documents holds ~2.7 KB: 8 KiB each leaves the heap room for everything else. */
export function defaultTotalSubscriptions(): number {
  return Math.max(1000, Math.floor(getHeapStatistics().heap_size_limit / 8192));
}

/** Why a subscription was refused a place: the server holds its limit, or the client's address its share. */
export type BudgetRefusal = 'server' | 'address';

export class SubscriptionBudget {
  private held = 0;
  /** Places held per address group. */
  private readonly byAddress = new Map<string, number>();
  /** What one address may hold. */
  readonly perAddress: number;
  private readonly refusals: RefusalLog;
  private readonly addressRefusals: RefusalLog;

  constructor(
    readonly limit: number,
    log: Logger,
  ) {
    this.perAddress = Math.max(1, Math.floor(limit / 2));
    this.refusals = new RefusalLog(log, 'refusing subscriptions: the server holds as many as it may (raise --max-total-subscriptions, or add servers)');
    this.addressRefusals = new RefusalLog(log, 'refusing subscriptions from an address that holds half of what the server may (behind proxies set HTTP_FORWARDED_COUNT)');
  }

  /** Takes a place for a new subscription of a client of `group` (addressGroup); the reason (and a warning at most once a minute) when none is left. */
  take(group: string): BudgetRefusal | undefined {
    if (this.held >= this.limit) {
      this.refusals.refusedOne({ limit: this.limit });
      return 'server';
    }
    const own = this.byAddress.get(group) ?? 0;
    if (own >= this.perAddress) {
      this.addressRefusals.refusedOne({ address: group, limit: this.perAddress });
      return 'address';
    }
    this.byAddress.set(group, own + 1);
    this.held++;
    return undefined;
  }

  release(group: string, count = 1): void {
    if (count === 0) return;
    const own = (this.byAddress.get(group) ?? 0) - count;
    if (own > 0) this.byAddress.set(group, own);
    else this.byAddress.delete(group);
    this.held -= count;
  }
}
