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

const limiters = new WeakMap<PerseidServer, RateLimiter>();

export interface RateLimiterSetup {
  /** Where the counters live; default: Redis at `REDIS_URL` when set, else memory. Only the first call's choice counts. */
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
  let limiter = limiters.get(server);
  if (!limiter) {
    const log = server.log.child('rate-limit');
    limiter = new RateLimiter({ store: setup.store ?? defaultStore(log), logger: log });
    limiters.set(server, limiter);
    server.beforeDispatch(limiter.hook);
    const closing = limiter;
    server.onClose(() => closing.close());
  }
  return limiter;
}

export { RateLimiter, TOO_MANY_REQUESTS } from './rate-limiter.js';
export type { RateLimitInput, RateLimitMatcher, RateLimitReply, RateLimitCallback, ErrorMessage, RateLimiterOptions } from './rate-limiter.js';
export type { RateLimitStore, RuleWindow, Hit } from './rate-limit.js';
export { MemoryRateLimitStore } from './rate-limit-memory.js';
export { RedisRateLimitStore } from './rate-limit-redis.js';
