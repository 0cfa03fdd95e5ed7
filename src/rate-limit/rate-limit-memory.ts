/**
 * Rate-limit counters in this process's memory: the default, and right for a
 * single server. With several servers each counts alone (a client spreading
 * its calls over n servers gets n times the limit): use `rate-limit-redis.ts`.
 */
import { MAX_BUCKETS_PER_RULE, type Hit, type RateLimitStore, type RuleWindow } from './rate-limit.js';

interface Counters {
  resetAt: number;
  buckets: Map<string, number>;
  /** The generation before `buckets`, dropped whole when `buckets` fills (deleting a Map's oldest key one at a time costs a scan each). */
  older: Map<string, number>;
}

export class MemoryRateLimitStore implements RateLimitStore {
  private readonly rules = new Map<string, Counters>();

  async hit(rule: RuleWindow, bucket: string, now: number): Promise<Hit> {
    let counters = this.rules.get(rule.id);
    if (!counters) this.rules.set(rule.id, (counters = { resetAt: rule.createdAt, buckets: new Map(), older: new Map() }));
    if (now - counters.resetAt > rule.intervalMs) {
      // New Maps, not clear(): the old ones' memory goes at once (a flood's buckets can be many).
      counters.resetAt = now;
      counters.buckets = new Map();
      counters.older = new Map();
    }
    let count = counters.buckets.get(bucket);
    if (count === undefined) {
      count = counters.older.get(bucket) ?? 0;
      counters.older.delete(bucket);
      if (counters.buckets.size >= MAX_BUCKETS_PER_RULE / 2) {
        counters.older = counters.buckets;
        counters.buckets = new Map();
      }
    }
    counters.buckets.set(bucket, ++count);
    return { count, timeToReset: rule.intervalMs - (now - counters.resetAt) };
  }

  async forget(rule: RuleWindow): Promise<void> {
    this.rules.delete(rule.id);
  }

  async close(): Promise<void> {
    this.rules.clear();
  }
}
