/** The coordination of fan-out servers, kept in Redis. */
import type { Redis } from 'ioredis';
import type { Lease, WatchedCollections } from './coordination.js';

export class RedisLease implements Lease {
  constructor(
    private readonly redis: Redis,
    private readonly key: string,
    private readonly holder: string,
    private readonly ttlMs: number,
  ) {}

  async acquire(): Promise<boolean> {
    if ((await this.redis.set(this.key, this.holder, 'PX', this.ttlMs, 'NX')) === 'OK') return true;
    if ((await this.redis.get(this.key)) !== this.holder) return false;
    await this.redis.pexpire(this.key, this.ttlMs);
    return true;
  }

  async release(): Promise<void> {
    if ((await this.redis.get(this.key)) === this.holder) await this.redis.del(this.key);
  }
}

/** A sorted set of collection names scored by when a server last said it watches them. */
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
