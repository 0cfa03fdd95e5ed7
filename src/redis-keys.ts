/**
 * Where the cluster's shared state lives in Redis. Apart from redis-client.ts:
 * the CLI loads ioredis only when Redis is used.
 */

/** The keys' namespace: one per database (MONGO_URL's), so apps sharing a Redis keep their servers, leases and counts apart. */
export function redisKeyPrefix(mongoUrl: string | undefined): string {
  if (!mongoUrl) return 'perseid:';
  const db = new URL(mongoUrl.replace(/^mongodb(\+srv)?:/, 'http:')).pathname.slice(1) || 'test';
  return `perseid:${db}:`;
}
