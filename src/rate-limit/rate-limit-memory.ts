/**
 * Rate-limit counters in this process's memory: the default, and right for a
 * single server. With several servers each counts alone (a client spreading
 * its calls over n servers gets n times the limit): use `rate-limit-redis.ts`.
 */
import type { Hit, RateLimitStore, RuleWindow } from './rate-limit.js';

interface Counters {
  resetAt: number;
  buckets: Map<string, number>;
}

export class MemoryRateLimitStore implements RateLimitStore {
  private readonly rules = new Map<string, Counters>();

  async hit(rule: RuleWindow, bucket: string, now: number): Promise<Hit> {
    let counters = this.rules.get(rule.id);
    if (!counters) this.rules.set(rule.id, (counters = { resetAt: rule.createdAt, buckets: new Map() }));
    if (now - counters.resetAt > rule.intervalMs) {
      // A new Map, not clear(): the old one's memory goes at once (a flood's buckets can be many).
      counters.resetAt = now;
      counters.buckets = new Map();
    }
    const count = (counters.buckets.get(bucket) ?? 0) + 1;
    counters.buckets.set(bucket, count);
    return { count, timeToReset: rule.intervalMs - (now - counters.resetAt) };
  }

  async forget(rule: RuleWindow): Promise<void> {
    this.rules.delete(rule.id);
  }

  async close(): Promise<void> {
    this.rules.clear();
  }
}
