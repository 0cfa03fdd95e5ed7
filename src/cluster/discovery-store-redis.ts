/** Discovery in Redis (REDIS_URL): one key per server, expired by Redis itself. Siblings: `discovery-store-mongo.ts`, `discovery-store-memory.ts`. */
import type { Redis } from 'ioredis';
import type { DiscoveryStore, ServerEntry } from './discovery-store.js';

export class RedisDiscoveryStore implements DiscoveryStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  async put(entry: ServerEntry, ttlMs: number): Promise<void> {
    await this.redis.set(`${this.prefix}${entry.id}`, JSON.stringify(entry), 'PX', ttlMs);
  }

  async remove(id: string): Promise<void> {
    await this.redis.del(`${this.prefix}${id}`);
  }

  async list(): Promise<ServerEntry[]> {
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, found] = await this.redis.scan(cursor, 'MATCH', `${this.prefix}*`, 'COUNT', 100);
      cursor = next;
      keys.push(...found);
    } while (cursor !== '0');
    if (keys.length === 0) return [];
    return (await this.redis.mget(keys)).filter((v): v is string => v !== null).map((v) => JSON.parse(v) as ServerEntry);
  }
}
