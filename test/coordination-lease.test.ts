/** The shared lease suite (test/suites/lease.ts) against memory, Redis, and the database lease on every database. */
import { describe } from 'node:test';
import { Redis } from 'ioredis';
import { DatabaseLease, LEASES_COLLECTION } from '../src/coordination/lease-database.js';
import { MemoryLeases } from '../src/coordination/lease-memory.js';
import { RedisLease } from '../src/coordination/lease-redis.js';
import { Random } from '../src/ddp/random.js';
import { setLogLevel } from '../src/log.js';
import { serviceUrl } from '../scripts/services/control.js';
import { embeddedTarget, mongoTargets } from './databases.js';
import { needsServices, skipOnMissing } from './skips.js';
import { leaseSuite } from './suites/lease.js';

describe('memory lease', () => {
  leaseSuite(async () => {
    const table = new MemoryLeases();
    return { make: (options) => table.lease(options), close: async () => undefined };
  });
});

setLogLevel((process.env.PERSEID_LOG_LEVEL as never) ?? 'silent');

const redisUrl = await serviceUrl('redis');
describe('redis lease', { skip: needsServices({ redis: redisUrl }) }, () => {
  leaseSuite(async () => {
    const redis = new Redis(redisUrl!);
    const prefix = `perseid-test:${Random.id(6)}:`;
    return {
      make: (options) => new RedisLease(redis, options, prefix),
      close: async () => {
        const keys = await redis.keys(`${prefix}*`);
        if (keys.length) await redis.del(...keys);
        redis.disconnect();
      },
    };
  });
});

const { targets, missing } = await mongoTargets();
skipOnMissing('database lease', missing);
// The lease needs only a collection driver; one target per server is enough (the change source does not matter).
const perServer = [embeddedTarget(), ...targets.filter((t, i) => targets.findIndex((u) => u.server === t.server) === i)];
for (const target of perServer) {
  describe(`database lease on ${target.server}`, () => {
    leaseSuite(async () => {
      const opened = await target.open();
      const collection = opened.database.driver.collection(LEASES_COLLECTION);
      return { make: (options) => new DatabaseLease(collection, options), close: () => opened.cleanup() };
    });
  });
}
