/** The shared watched-collections suite (test/suites/watched-collections.ts) against memory and Redis. */
import { describe } from 'node:test';
import { Redis } from 'ioredis';
import { Random } from '../src/ddp/random.js';
import { MemoryWatchedCollections } from '../src/fanout/watched-collections-memory.js';
import { RedisWatchedCollections } from '../src/fanout/watched-collections-redis.js';
import { serviceUrl } from '../scripts/services/control.js';
import { needsServices } from './skips.js';
import { watchedCollectionsSuite } from './suites/watched-collections.js';

describe('memory watched collections', () => {
  watchedCollectionsSuite(async () => ({ make: (ttlMs) => new MemoryWatchedCollections(ttlMs), close: async () => undefined }));
});

const redisUrl = await serviceUrl('redis');
describe('redis watched collections', { skip: needsServices({ redis: redisUrl }) }, () => {
  watchedCollectionsSuite(async () => {
    const redis = new Redis(redisUrl!);
    const keys: string[] = [];
    return {
      make: (ttlMs) => {
        const key = `perseid-test:${Random.id(6)}:watched`;
        keys.push(key);
        return new RedisWatchedCollections(redis, key, ttlMs);
      },
      close: async () => {
        if (keys.length) await redis.del(...keys);
        redis.disconnect();
      },
    };
  });
});
