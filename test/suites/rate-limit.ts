/**
 * What every rate-limit store owes (rate-limit/rate-limit.ts), and Meteor's
 * DDPRateLimiter semantics on top of it, written once and run against each
 * store (test/rate-limit.test.ts).
 */
import assert from 'node:assert/strict';
import { backendTest } from './backend-test.js';
import { MAX_BUCKETS_PER_RULE, type RateLimitStore, type RuleWindow } from '../../src/rate-limit/rate-limit.js';
import { RateLimiter, type RateLimitInput } from '../../src/rate-limit/rate-limiter.js';
import { Random } from '../../src/ddp/random.js';

export type MakeStore = () => Promise<{ store: RateLimitStore; close(): Promise<void> }>;

const input = (over: Partial<RateLimitInput> = {}): RateLimitInput => ({
  type: 'method',
  name: 'login',
  userId: null,
  connectionId: 'c1',
  clientAddress: '127.0.0.1',
  ...over,
});

export function rateLimitSuite(make: MakeStore): void {
  const run = backendTest(make, (backend) => backend.store);
  const rule = (intervalMs: number, createdAt = Date.now()): RuleWindow => ({ id: `r-${Random.id(8)}`, intervalMs, createdAt });

  run('counts per bucket within a window and restarts every bucket when it ends', async (store) => {
    const r = rule(10000, 1000);
    assert.deepEqual(await store.hit(r, 'a', 5000), { count: 1, timeToReset: 6000 });
    assert.deepEqual(await store.hit(r, 'a', 6000), { count: 2, timeToReset: 5000 });
    assert.deepEqual(await store.hit(r, 'b', 6000), { count: 1, timeToReset: 5000 });
    // At exactly the interval the window still runs (Meteor resets when more has passed).
    assert.deepEqual(await store.hit(r, 'a', 11000), { count: 3, timeToReset: 0 });
    // The next window starts at the first event after the old one ended, for all buckets.
    assert.deepEqual(await store.hit(r, 'b', 11001), { count: 1, timeToReset: 10000 });
    assert.deepEqual(await store.hit(r, 'a', 12001), { count: 1, timeToReset: 9000 });
  });

  run('keeps rules apart and forgets a removed one', async (store) => {
    const r1 = rule(10000, 0);
    const r2 = rule(10000, 0);
    await store.hit(r1, 'x', 1);
    await store.hit(r1, 'x', 2);
    assert.equal((await store.hit(r2, 'x', 3)).count, 1);
    await store.forget(r1);
    assert.equal((await store.hit({ ...r1, createdAt: 100 }, 'x', 200)).count, 1);
  });

  run('counts concurrent hits exactly', async (store) => {
    const r = rule(60000);
    const now = Date.now();
    const counts = await Promise.all(Array.from({ length: 200 }, () => store.hit(r, 'same', now).then((h) => h.count)));
    assert.deepEqual(counts.sort((a, b) => a - b), Array.from({ length: 200 }, (_v, i) => i + 1));
  });

  run("keeps a rule's most recent keys: a flood of distinct keys in a long window drops the oldest, not memory without bound", async (store) => {
    // forgotPassword's limit: an hour per e-mail address, and an address per call from a flood.
    const r = rule(3_600_000, 0);
    await store.hit(r, 'idle@example.com', 1);
    await store.hit(r, 'steady@example.com', 1);
    const flood = 2 * MAX_BUCKETS_PER_RULE;
    for (let i = 0; i < flood; i += 1000) {
      await Promise.all(Array.from({ length: 1000 }, (_v, j) => store.hit(r, `flood-${i + j}@example.com`, 2)));
      // A key asked for again and again keeps its count however many others come.
      await store.hit(r, 'steady@example.com', 2);
    }
    assert.equal((await store.hit(r, 'steady@example.com', 3)).count, 2 + flood / 1000);
    assert.equal((await store.hit(r, `flood-${flood - 1}@example.com`, 3)).count, 2, 'a recent key is still counted');
    assert.equal((await store.hit(r, 'idle@example.com', 3)).count, 1, 'a key not asked for since the flood began is dropped');
  });

  run("applies Meteor's matchers: literals, predicates, null (any value, not in the bucket)", async (store) => {
    const limiter = new RateLimiter({ store });
    limiter.addRule({ type: 'method', name: (n: string) => n.startsWith('log'), connectionId: null }, 2, 10000);
    // One bucket for every connection (connectionId is null), one per method name.
    assert.equal((await limiter.apply(input({ connectionId: 'a' }))).allowed, true);
    assert.equal((await limiter.apply(input({ connectionId: 'b' }))).allowed, true);
    const refused = await limiter.apply(input({ connectionId: 'c' }));
    assert.equal(refused.allowed, false);
    assert.equal(refused.numInvocationsLeft, 0);
    assert.ok(refused.timeToReset > 9000 && refused.timeToReset <= 10000, `timeToReset ${refused.timeToReset}`);
    assert.match(refused.message!, /^Error, too many requests\. Please slow down\. You must wait 10 seconds before trying again\.$/);
    assert.equal((await limiter.apply(input({ name: 'logout' }))).allowed, true, 'another name is another bucket');
    assert.equal((await limiter.apply(input({ name: 'other' }))).timeToReset, 0, 'a name the predicate refuses matches no rule');
    assert.equal((await limiter.apply(input({ type: 'subscription' }))).allowed, true, 'a literal must be equal');
  });

  run('buckets by every matched key; reports the tightest rule while allowed, the longest reset once refused', async (store) => {
    const limiter = new RateLimiter({ store });
    limiter.addRule({ connectionId: () => true }, 5, 60000);
    limiter.addRule({ name: 'login' }, 3, 1000);
    const first = await limiter.apply(input());
    assert.deepEqual({ allowed: first.allowed, left: first.numInvocationsLeft }, { allowed: true, left: 2 });
    assert.ok(first.timeToReset <= 1000, 'the rule with the fewest calls left decides');
    await limiter.apply(input());
    await limiter.apply(input());
    const refused = await limiter.apply(input());
    assert.equal(refused.allowed, false);
    // As Meteor: the longest reset among the rules weighed up to the refusal, the allowing 60 s rule's included.
    assert.ok(refused.timeToReset > 50000, `timeToReset ${refused.timeToReset}`);
    assert.equal((await limiter.apply(input({ connectionId: 'c2', name: 'y' }))).numInvocationsLeft, 4, 'connections have their own buckets');
  });

  run('allows again once the window has passed, and not before', async (store) => {
    const limiter = new RateLimiter({ store });
    limiter.addRule({ name: 'login' }, 1, 300);
    const started = Date.now();
    assert.equal((await limiter.apply(input())).allowed, true);
    assert.equal((await limiter.apply(input())).allowed, false);
    const deadline = Date.now() + 3000;
    while (!(await limiter.apply(input())).allowed) {
      assert.ok(Date.now() < deadline, 'still refused 3 s after a 300 ms window');
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.ok(Date.now() - started >= 300, 'allowed again before the window ended');
  });

  run('removeRule lifts its limit; custom messages, per limiter and per rule; callbacks see each decision', async (store) => {
    const limiter = new RateLimiter({ store });
    const seen: boolean[] = [];
    const id = limiter.addRule({ name: 'login' }, 1, 10000, (reply) => seen.push(reply.allowed));
    await limiter.apply(input());
    limiter.setErrorMessage((reply) => `wait ${reply.timeToReset > 0 ? 'a bit' : 'no'}`);
    assert.equal((await limiter.apply(input())).message, 'wait a bit');
    limiter.setErrorMessageOnRule(id, 'slow down on login');
    assert.equal((await limiter.apply(input())).message, 'slow down on login');
    assert.deepEqual(seen, [true, false, false]);
    assert.equal(limiter.removeRule(id), true);
    assert.equal(limiter.removeRule(id), false);
    assert.equal((await limiter.apply(input())).allowed, true);
  });
}
