/** The shared lease suite (test/suites/lease.ts) against memory, Redis, and the database lease on every database. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
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

// Processes sharing one MongoDB may disagree on the time (the embedded store is one process's, on its own clock).
for (const target of targets.filter((t, i) => targets.findIndex((u) => u.server === t.server) === i)) {
  it(`database lease on ${target.server}: a holder whose clock runs ahead by more than the lease leaves a live lease alone`, async () => {
    const opened = await target.open();
    const realNow = Date.now;
    try {
      const collection = opened.database.driver.collection(LEASES_COLLECTION);
      const live = new DatabaseLease(collection, { name: 'skewed', holder: 'live', ttlMs: 3000 });
      const ahead = new DatabaseLease(collection, { name: 'skewed', holder: 'ahead', ttlMs: 3000 });
      const token = await live.acquire();
      assert.equal(typeof token, 'number');
      Date.now = () => realNow() + 8000;
      assert.equal(await ahead.acquire(), undefined, 'a process 8 s ahead took a lease renewed just now');
      Date.now = realNow;
      assert.equal(await live.acquire(), token);
    } finally {
      Date.now = realNow;
      await opened.cleanup();
    }
  });
}
