/**
 * Rate-limit counters in Redis, shared by every server of a cluster (chosen
 * when `REDIS_URL` is set): a client gets its limit once, whichever servers
 * its connections land on. Each rule is one hash (`@reset` plus a field per
 * bucket, and an older generation's hash) updated by one Lua script, so
 * concurrent hits from many servers count exactly; the hash expires after an
 * idle window. The caller's clock dates the window, as in Meteor. Sibling: `rate-limit-memory.ts`.
 *
 * A client made with `enableOfflineQueue: false` (the default store's, so an
 * outage fails fast) refuses commands until it has connected; calls that came
 * in the first moments after start then counted apart on each server. Until
 * the client's first connection settles (ready, or failed), a hit waits for
 * it, at most FIRST_CONNECTION_MS.
 */
import type { Redis } from 'ioredis';
import { MAX_BUCKETS_PER_RULE, type Hit, type RateLimitStore, type RuleWindow } from './rate-limit.js';

/** The longest a hit waits for the client's first connection before failing (the limiter then counts in this process). */
export const FIRST_CONNECTION_MS = 3000;

/** Settles when `redis`'s connection attempt under way ends (ready, an error, closed) or after `ms`; at once when none is. */
function firstConnection(redis: Redis, ms: number): Promise<void> | undefined {
  if (redis.status !== 'connecting' && redis.status !== 'connect') return undefined;
  return new Promise((resolve) => {
    const events = ['ready', 'error', 'close', 'end'] as const;
    const done = () => {
      clearTimeout(timer);
      for (const event of events) redis.off(event, done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    for (const event of events) redis.once(event, done);
  });
}

// KEYS[1] the rule's hash, KEYS[2] its older generation; ARGV: now, interval ms, rule created at, bucket, generation size.
// A full hash becomes the older generation by RENAME, which keeps its expiry and drops the one before.
const HIT = `
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local reset = tonumber(redis.call('HGET', KEYS[1], '@reset') or ARGV[3])
if now - reset > interval then
  redis.call('DEL', KEYS[1], KEYS[2])
  reset = now
end
local field = 'b:' .. ARGV[4]
local count = redis.call('HGET', KEYS[1], field)
if not count then
  count = redis.call('HGET', KEYS[2], field) or 0
  redis.call('HDEL', KEYS[2], field)
  if redis.call('HLEN', KEYS[1]) > tonumber(ARGV[5]) then redis.call('RENAME', KEYS[1], KEYS[2]) end
end
count = tonumber(count) + 1
redis.call('HSET', KEYS[1], '@reset', reset, field, count)
redis.call('PEXPIRE', KEYS[1], interval * 2 + 1000)
return {count, interval - (now - reset)}
`;

export class RedisRateLimitStore implements RateLimitStore {
  private connecting: Promise<void> | undefined;

  /** `prefix` namespaces the keys (one per app); a rule lives at `<prefix>rate-limit:<rule id>`. */
  constructor(
    private readonly redis: Redis,
    private readonly prefix = 'perseid:',
    /** Whether close() disconnects the client (true when the store made it). */
    private readonly ownsClient = false,
  ) {
    this.connecting = firstConnection(redis, FIRST_CONNECTION_MS)?.then(() => {
      this.connecting = undefined;
    });
  }

  async hit(rule: RuleWindow, bucket: string, now: number): Promise<Hit> {
    if (this.connecting) await this.connecting;
    const key = this.key(rule);
    const [count, timeToReset] = (await this.redis.eval(HIT, 2, key, `${key}:older`, now, rule.intervalMs, rule.createdAt, bucket, MAX_BUCKETS_PER_RULE / 2)) as [number, number];
    return { count, timeToReset };
  }

  async forget(rule: RuleWindow): Promise<void> {
    await this.redis.del(this.key(rule), `${this.key(rule)}:older`);
  }

  async close(): Promise<void> {
    if (this.ownsClient) this.redis.disconnect();
  }

  private key(rule: RuleWindow): string {
    return `${this.prefix}rate-limit:${rule.id}`;
  }
}
