/**
 * Rate-limit counters in Redis, shared by every server of a cluster (chosen
 * when `REDIS_URL` is set): a client gets its limit once, whichever servers
 * its connections land on. Each rule is one hash (`@reset` plus a field per
 * bucket) updated by one Lua script, so concurrent hits from many servers
 * count exactly; the hash expires after an idle window. The caller's clock
 * dates the window, as in Meteor. Sibling: `rate-limit-memory.ts`.
 */
import type { Redis } from 'ioredis';
import type { Hit, RateLimitStore, RuleWindow } from './rate-limit.js';

// KEYS[1] the rule's hash; ARGV: now, interval ms, rule created at, bucket.
const HIT = `
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local reset = tonumber(redis.call('HGET', KEYS[1], '@reset') or ARGV[3])
if now - reset > interval then
  redis.call('DEL', KEYS[1])
  reset = now
end
redis.call('HSET', KEYS[1], '@reset', reset)
local count = redis.call('HINCRBY', KEYS[1], 'b:' .. ARGV[4], 1)
redis.call('PEXPIRE', KEYS[1], interval * 2 + 1000)
return {count, interval - (now - reset)}
`;

export class RedisRateLimitStore implements RateLimitStore {
  /** `prefix` namespaces the keys (one per app); a rule lives at `<prefix>rate-limit:<rule id>`. */
  constructor(
    private readonly redis: Redis,
    private readonly prefix = 'perseid:',
    /** Whether close() disconnects the client (true when the store made it). */
    private readonly ownsClient = false,
  ) {}

  async hit(rule: RuleWindow, bucket: string, now: number): Promise<Hit> {
    const [count, timeToReset] = (await this.redis.eval(HIT, 1, this.key(rule), now, rule.intervalMs, rule.createdAt, bucket)) as [number, number];
    return { count, timeToReset };
  }

  async forget(rule: RuleWindow): Promise<void> {
    await this.redis.del(this.key(rule));
  }

  async close(): Promise<void> {
    if (this.ownsClient) this.redis.disconnect();
  }

  private key(rule: RuleWindow): string {
    return `${this.prefix}rate-limit:${rule.id}`;
  }
}
