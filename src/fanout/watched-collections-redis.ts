/** The watched collections as a Redis sorted set of names, scored by when a server last said it watches them. */
import type { Redis } from 'ioredis';
import type { WatchedCollections } from './watched-collections.js';

export class RedisWatchedCollections implements WatchedCollections {
  constructor(
    private readonly redis: Redis,
    private readonly key: string,
    /** Announcements older than this no longer count. */
    private readonly ttlMs: number,
  ) {}

  async announce(collections: readonly string[]): Promise<void> {
    if (collections.length === 0) return;
    const now = Date.now();
    await this.redis.zadd(this.key, ...collections.flatMap((c) => [now, c]));
    await this.redis.zremrangebyscore(this.key, '-inf', now - 4 * this.ttlMs);
  }

  async list(): Promise<string[]> {
    return this.redis.zrangebyscore(this.key, Date.now() - this.ttlMs, '+inf');
  }
}
