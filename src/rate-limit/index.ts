/**
 * A server's rate limiter (Meteor's DDPRateLimiter, one per server): created
 * and hooked in before dispatch on first use, with its counters in Redis when
 * `REDIS_URL` is set (every server of a cluster then shares them), else in
 * memory.
 */
import { redisClient } from '../redis-client.js';
import { redisKeyPrefix } from '../redis-keys.js';
import type { Logger } from '../log.js';
import type { PerseidServer } from '../server/app.js';
import { MemoryRateLimitStore } from './rate-limit-memory.js';
import { RedisRateLimitStore } from './rate-limit-redis.js';
import type { RateLimitStore } from './rate-limit.js';
import { RateLimiter } from './rate-limiter.js';

const limiters = new WeakMap<PerseidServer, { limiter: RateLimiter; store: RateLimitStore }>();

export interface RateLimiterSetup {
  /** Where the counters live; default: Redis at `REDIS_URL` when set, else memory. Given at the server's first call only. */
  store?: RateLimitStore;
}

function defaultStore(log: Logger): RateLimitStore {
  const url = process.env.REDIS_URL;
  if (!url) return new MemoryRateLimitStore();
  // Fail fast while Redis is away (the limiter then counts in this process) rather than queueing every call behind it.
  const redis = redisClient(url, { maxRetriesPerRequest: 1, enableOfflineQueue: false, lazyConnect: false }, log);
  return new RedisRateLimitStore(redis, redisKeyPrefix(process.env.MONGO_URL), true);
}

/** The rate limiter of `server` (created, and run before every method and subscription, on first use). */
export function rateLimiter(server: PerseidServer, setup: RateLimiterSetup = {}): RateLimiter {
  const existing = limiters.get(server);
  if (existing) {
    // A store given once the limiter counts elsewhere was dropped without a word (accounts(server) makes the limiter).
    if (setup.store && setup.store !== existing.store) {
      throw new TypeError("This server's rate limiter already counts in another store (accounts(server) makes it for its login limit): call rateLimiter(server, { store }) first, before accounts(server) or any other rateLimiter(server)");
    }
    return existing.limiter;
  }
  const log = server.log.child('rate-limit');
  const store = setup.store ?? defaultStore(log);
  const limiter = new RateLimiter({ store, logger: log });
  limiters.set(server, { limiter, store });
  server.beforeDispatch(limiter.hook);
  server.onClose(() => limiter.close());
  return limiter;
}

export { RateLimiter, TOO_MANY_REQUESTS } from './rate-limiter.js';
export { checkRule } from './rule-check.js';
export type { RateLimitInput, RateLimitMatcher, RateLimitReply, RateLimitCallback, ErrorMessage, RateLimiterOptions } from './rate-limiter.js';
export type { RateLimitStore, RuleWindow, Hit } from './rate-limit.js';
export { MemoryRateLimitStore } from './rate-limit-memory.js';
export { RedisRateLimitStore } from './rate-limit-redis.js';
