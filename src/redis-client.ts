/**
 * An ioredis client for the cluster's shared state (discovery, job leases,
 * rate-limit counters). ioredis retries a lost connection by itself and
 * reports each failed attempt as an 'error' event, which, with no listener,
 * it prints with a stack ("[ioredis] Unhandled error event"); here they go to
 * the log, one line when the connection starts failing and one when it works
 * again. Commands meanwhile fail as their options say. A connection that
 * leaves a command unanswered for UNANSWERED_MS is replaced the same way.
 */
import { Redis, type RedisOptions } from 'ioredis';
import { FailureLog } from './failure-log.js';
import { redactedUrl, type Logger } from './log.js';

/**
 * How long a command may wait for its answer before its connection is taken for dead and replaced (ioredis's
 * socketTimeout). A Redis that stops answering without closing the connection (a network partition, a frozen host
 * or proxy) is otherwise waited on, without a word, until TCP gives up some 15 minutes later.
 */
export const UNANSWERED_MS = 5000;

export function redisClient(url: string, options: RedisOptions, log: Logger): Redis {
  const redis = new Redis(url, { socketTimeout: UNANSWERED_MS, ...options });
  const failures = new FailureLog(log, 'redis connection', { url: redactedUrl(url) });
  redis.on('error', (error: Error) => failures.failed(error));
  redis.on('ready', () => failures.succeeded());
  return redis;
}
