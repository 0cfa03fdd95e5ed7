/**
 * Accounts under abuse an operator must survive, over the wire: sign-ups
 * racing for one name in different case (on the embedded store,
 * mongo-java-server and FerretDB), a sign-up whose hook hangs, a client reconnecting to get past
 * the per-connection limit, oversized profiles, and one victim's address
 * mailed again and again through forgotPassword, on one server or several
 * sharing their rate limits in Redis.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { serviceUrl } from '../scripts/services/control.js';
import { accounts } from '../src/accounts/index.js';
import { SIGNUP_HOLD_MS } from '../src/accounts/accounts.js';
import type { AccountsEmail } from '../src/accounts/mailer.js';
import { Random } from '../src/ddp/random.js';
import { rateLimiter, RedisRateLimitStore } from '../src/rate-limit/index.js';
import { createServer } from '../src/server/app.js';
import { embeddedTarget, mongoTargets, type DatabaseTarget } from './databases.js';
import { accountsServer, call, errorOf } from './accounts-helpers.js';
import { RawPeer, type Message } from './helpers.js';
import { needsServices, skipOnMissing } from './skips.js';

/** `count` spellings of `name` differing only in case (Alice, aLice, ALice, ...). */
function caseVariants(name: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => [...name].map((ch, j) => ((i >> j) & 1 ? ch.toUpperCase() : ch)).join(''));
}

/** Calls `method` once per argument, each on a connection of its own, all at once. */
async function eachOnItsOwnConnection(wsUrl: string, method: string, args: unknown[]): Promise<Message[]> {
  const peers = await Promise.all(args.map(() => RawPeer.connected(wsUrl)));
  try {
    return await Promise.all(peers.map((peer, i) => call(peer, method, args[i])));
  } finally {
    for (const peer of peers) peer.close();
  }
}

const redisUrl = await serviceUrl('redis');

describe('accounts under abuse (embedded store)', () => {
  let opened: Awaited<ReturnType<ReturnType<typeof embeddedTarget>['open']>>;
  before(async () => {
    opened = await embeddedTarget().open();
  });
  after(() => opened.cleanup());

  it('refuses a profile over maxProfileBytes (16 KiB by default), or with a key FerretDB refuses, in one line, and stores nothing', async () => {
    const t = await accountsServer(opened.database, { defaultRateLimit: false });
    const small = await accountsServer(opened.database, { defaultRateLimit: false, maxProfileBytes: 100 });
    try {
      const peer = await RawPeer.connected(t.wsUrl);
      const big = await call(peer, 'createUser', { username: 'big', profile: { bio: 'x'.repeat(1024 * 1024 - 200) } });
      assert.deepEqual(errorOf(big), { error: 400, reason: 'Profile too large: at most 16384 bytes as JSON' });
      assert.equal(await t.accounts.users.findOneAsync({ username: 'big' }), undefined);
      const fits = await call(peer, 'createUser', { username: 'fits', profile: { bio: 'x'.repeat(16 * 1024 - 20) } });
      assert.equal(fits.error, undefined);
      peer.close();

      const other = await RawPeer.connected(small.wsUrl);
      assert.deepEqual(errorOf(await call(other, 'createUser', { username: 'tiny', profile: { bio: 'x'.repeat(100) } })), {
        error: 400,
        reason: 'Profile too large: at most 100 bytes as JSON',
      });
      assert.equal((await call(other, 'createUser', { username: 'tiny', profile: { name: 'Tiny' } })).error, undefined);
      other.close();

      // Keys FerretDB refuses at any depth are refused on every store, in one line naming the key.
      const keys = await RawPeer.connected(t.wsUrl);
      for (const [profile, key] of [
        [{ 'a.b': 1 }, 'a.b'],
        [{ settings: { theme: 'dark', $where: '1' } }, '$where'],
        [{ list: [{ ok: 1 }, { 'x.y': 2 }] }, 'x.y'],
      ] as const) {
        assert.deepEqual(errorOf(await call(keys, 'createUser', { username: 'keys', profile })), {
          error: 400,
          reason: `Profile key "${key}" may not start with $ or contain a dot`,
        });
      }
      assert.equal(await t.accounts.users.findOneAsync({ username: 'keys' }), undefined);
      assert.equal((await call(keys, 'createUser', { username: 'keys', profile: { list: [{ ok: 1 }], 'price$': 2 } })).error, undefined);
      keys.close();
    } finally {
      await t.close();
      await small.close();
    }
  });

  it('limits login methods per client address by default, over all its connections (60 a minute)', async () => {
    const t = await accountsServer(opened.database);
    try {
      // A new connection for every 5 calls gets past Meteor's per-connection rule; the address's rule stops it.
      const results: Message[] = [];
      for (let round = 0; round < 13; round++) {
        results.push(...(await eachOnItsOwnConnection(t.wsUrl, 'createUser', [0, 1, 2, 3, 4].map((i) => ({ username: `flood${round}-${i}` })))));
      }
      const refused = results.filter((r) => errorOf(r)?.error === 'too-many-requests');
      assert.equal(results.length - refused.length, 60, 'the first 60 are answered');
      assert.equal(refused.length, 5);
      assert.ok(((refused[0]!.error as Message).details as { timeToReset: number }).timeToReset > 0);
      assert.equal(t.accounts.removeDefaultRateLimit(), true);
      const [after] = await eachOnItsOwnConnection(t.wsUrl, 'createUser', [{ username: 'after-removal' }]);
      assert.equal(after!.error, undefined, 'removeDefaultRateLimit lifts the address limit too');
    } finally {
      await t.close();
    }
  });

  it('takes addressRateLimit as a count and window, or false for Meteor\'s rule alone', async () => {
    const strict = await accountsServer(opened.database, { addressRateLimit: { numRequests: 3, intervalMs: 60_000 } });
    const off = await accountsServer(opened.database, { addressRateLimit: false });
    try {
      const args = [0, 1, 2, 3].map((i) => ({ user: { username: `nobody${i}` }, password: 'x' }));
      const limited = (await eachOnItsOwnConnection(strict.wsUrl, 'login', args)).map((r) => errorOf(r)?.error);
      assert.equal(limited.filter((e) => e === 'too-many-requests').length, 1);
      const free = (await eachOnItsOwnConnection(off.wsUrl, 'login', [...args, ...args])).map((r) => errorOf(r)?.error);
      assert.equal(free.filter((e) => e === 'too-many-requests').length, 0);
    } finally {
      await strict.close();
      await off.close();
    }
  });

  it('does not count resume logins per address: every client behind one NAT resumes at once when the server restarts', async () => {
    const t = await accountsServer(opened.database, { addressRateLimit: { numRequests: 1, intervalMs: 60_000 } });
    try {
      await t.accounts.createUser({ username: 'resumer', password: 'pw' });
      const [first] = await eachOnItsOwnConnection(t.wsUrl, 'login', [{ user: { username: 'resumer' }, password: 'pw' }]);
      const { token, id } = first!.result as { token: string; id: string };
      const resumes = await eachOnItsOwnConnection(t.wsUrl, 'login', Array.from({ length: 8 }, () => ({ resume: token })));
      assert.deepEqual(resumes.map((r) => (r.result as Message | undefined)?.id), Array.from({ length: 8 }, () => id));
      const [again] = await eachOnItsOwnConnection(t.wsUrl, 'login', [{ user: { username: 'resumer' }, password: 'pw' }]);
      assert.equal(errorOf(again!)?.error, 'too-many-requests', 'a password login is counted');
    } finally {
      await t.close();
    }
  });

  it('mails one address at most 3 password resets an hour, whichever connections ask, and refuses unknown addresses alike', async () => {
    const mails: AccountsEmail[] = [];
    const t = await accountsServer(opened.database, { defaultRateLimit: false, mailer: (m) => void mails.push(m) });
    const one = await accountsServer(opened.database, { defaultRateLimit: false, mailer: () => undefined, forgotPasswordLimit: { numRequests: 1, intervalMs: 60_000 } });
    try {
      await t.accounts.createUser({ username: 'victim', email: 'victim@example.com' });
      const asks = ['victim@example.com', 'VICTIM@example.com', 'Victim@Example.com', 'victim@example.com', 'victim@EXAMPLE.com'].map((email) => ({ email }));
      const results: Message[] = [];
      // One after another, each from a new connection, as a client reconnecting between calls.
      for (const ask of asks) results.push(...(await eachOnItsOwnConnection(t.wsUrl, 'forgotPassword', [ask])));
      assert.deepEqual(results.map((r) => errorOf(r)?.error), [undefined, undefined, undefined, 'too-many-requests', 'too-many-requests']);
      const wait = ((results[3]!.error as Message).details as { timeToReset: number }).timeToReset;
      assert.ok(wait > 3_500_000 && wait <= 3_600_000, `refused for the rest of the hour (${wait} ms)`);
      assert.equal(mails.length, 3);

      // An address no user has is counted the same way, so the refusal does not tell which addresses exist.
      const unknown = await eachOnItsOwnConnection(t.wsUrl, 'forgotPassword', [0, 1, 2, 3].map(() => ({ email: 'nobody@example.com' })));
      assert.deepEqual(unknown.map((r) => errorOf(r)?.error).sort(), [403, 403, 403, 'too-many-requests']);

      const configured = await eachOnItsOwnConnection(one.wsUrl, 'forgotPassword', [{ email: 'victim@example.com' }, { email: 'victim@example.com' }]);
      assert.deepEqual(configured.map((r) => errorOf(r)?.error ?? 'mailed').sort(), ['mailed', 'too-many-requests'], 'forgotPasswordLimit: 1 a minute');
    } finally {
      await t.close();
      await one.close();
    }
  });

  it('answers a sign-up for a name whose earlier sign-up hangs in a hook, once that one has held the name SIGNUP_HOLD_MS', { timeout: 25_000 }, async () => {
    const t = await accountsServer(opened.database, { defaultRateLimit: false }, (_server, acc) => {
      // A hook awaiting a service that never answers, for the first sign-up only.
      let first = true;
      acc.onCreateUser(async (_options, user) => {
        if (first) {
          first = false;
          await new Promise(() => undefined);
        }
        return user;
      });
    });
    const [hung, later] = await Promise.all([RawPeer.connected(t.wsUrl), RawPeer.connected(t.wsUrl)]);
    try {
      hung.send({ msg: 'method', id: 'hangs', method: 'createUser', params: [{ username: 'stuck' }] });
      await new Promise((resolve) => setTimeout(resolve, 200));
      const started = Date.now();
      later.send({ msg: 'method', id: 'later', method: 'createUser', params: [{ username: 'STUCK' }] });
      const reply = await later.next((m) => m.msg === 'result' && m.id === 'later', SIGNUP_HOLD_MS + 3000);
      assert.equal(reply.error, undefined, JSON.stringify(reply.error));
      assert.ok(Date.now() - started >= SIGNUP_HOLD_MS - 500, `waited its turn: answered after ${Date.now() - started} ms`);
      assert.equal((await t.accounts.users.find({ username: 'STUCK' }).fetchAsync()).length, 1);
    } finally {
      hung.close();
      later.close();
      await t.close();
    }
  });

  it('counts the reset e-mails to one address over every server sharing the rate limits in Redis', { skip: needsServices({ redis: redisUrl }) }, async () => {
    const redis = new Redis(redisUrl!);
    const prefix = `perseid-test:${Random.id(6)}:`;
    const mails: AccountsEmail[] = [];
    const servers = await Promise.all(
      [0, 1].map(async () => {
        const server = createServer();
        rateLimiter(server, { store: new RedisRateLimitStore(redis, prefix) });
        const acc = accounts(server, { database: opened.database, defaultRateLimit: false, mailer: (m) => void mails.push(m) });
        await acc.ready;
        const { port } = await server.listen(0, '127.0.0.1');
        return { server, wsUrl: `ws://127.0.0.1:${port}/websocket` };
      }),
    );
    try {
      await accounts(servers[0]!.server).createUser({ username: 'shared', email: 'shared@example.com' });
      const errors: unknown[] = [];
      for (const i of [0, 1, 0, 1]) errors.push(...(await eachOnItsOwnConnection(servers[i]!.wsUrl, 'forgotPassword', [{ email: 'shared@example.com' }])).map((r) => errorOf(r)?.error));
      assert.deepEqual(errors, [undefined, undefined, undefined, 'too-many-requests']);
      assert.equal(mails.length, 3);
    } finally {
      for (const { server } of servers) await server.close();
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length) await redis.del(...keys);
      redis.disconnect();
    }
  });
});

// The race does not depend on the store, and each store answers the duplicate check on its own: all three.
const { targets, missing } = await mongoTargets();
const stores: DatabaseTarget[] = [embeddedTarget(), ...['mongo-java-server', 'ferretdb'].flatMap((server) => targets.find((t) => t.server === server && t.source === 'poll') ?? [])];
skipOnMissing('accounts: names ignoring case', missing);
for (const store of stores) {
  describe(`accounts: names ignoring case on ${store.label}`, () => {
    // mongo-java-server's find() answers nothing on its unique index over emails.address (countDocuments finds the user).
    const findsByEmail = store.server !== 'mongo-java-server' || 'mongo-java-server finds no user by emails.address';
    it('counts reset e-mails to one address over spellings its case-insensitive lookup takes for it (kiſſ for kiss)', { skip: findsByEmail !== true && findsByEmail }, async () => {
      const opened = await store.open();
      const mails: AccountsEmail[] = [];
      const t = await accountsServer(opened.database, { defaultRateLimit: false, mailer: (m) => void mails.push(m) });
      try {
        await t.accounts.createUser({ username: 'kiss', email: 'kiss@example.com' });
        // U+017F (long s) and U+212A (Kelvin sign): MongoDB-wire stores' /i matches them to s and k.
        const asks = ['kiss@example.com', 'kiss@example.com', 'kiss@example.com', 'kiſſ@example.com', 'ki\u017Fs@example.com', '\u212Aiss@example.com'].map((email) => ({ email }));
        const results: Message[] = [];
        for (const ask of asks) results.push(...(await eachOnItsOwnConnection(t.wsUrl, 'forgotPassword', [ask])));
        assert.deepEqual(results.map((r) => errorOf(r)?.error), [undefined, undefined, undefined, 'too-many-requests', 'too-many-requests', 'too-many-requests']);
        assert.equal(mails.length, 3);
      } finally {
        await t.close();
        await opened.cleanup();
      }
    });

    it('gives the name to exactly one of 20 sign-ups racing for it in different case', async () => {
      const opened = await store.open();
      const t = await accountsServer(opened.database, { defaultRateLimit: false });
      try {
        for (const name of ['alice', 'bobby', 'carol']) {
          const results = await eachOnItsOwnConnection(
            t.wsUrl,
            'createUser',
            caseVariants(name, 20).map((username) => ({ username })),
          );
          const succeeded = results.filter((r) => r.error === undefined);
          assert.equal(succeeded.length, 1, `${name}: ${JSON.stringify(results.map((r) => errorOf(r)?.reason ?? 'ok'))}`);
          const stored = await t.accounts.users.find({ username: new RegExp(`^${name}$`, 'i') }).fetchAsync();
          assert.deepEqual(stored.map((u) => u._id), [(succeeded[0]!.result as Message).id]);
        }
      } finally {
        await t.close();
        await opened.cleanup();
      }
    });
  });
}
