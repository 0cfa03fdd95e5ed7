/**
 * Accounts under abuse an operator must survive, over the wire: sign-ups
 * racing for one name in different case, and oversized profiles.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { embeddedTarget } from './databases.js';
import { accountsServer, call, errorOf } from './accounts-helpers.js';
import { RawPeer, type Message } from './helpers.js';

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

describe('accounts under abuse (embedded store)', () => {
  let opened: Awaited<ReturnType<ReturnType<typeof embeddedTarget>['open']>>;
  before(async () => {
    opened = await embeddedTarget().open();
  });
  after(() => opened.cleanup());

  it('gives a name to exactly one of 20 sign-ups racing for it in different case', async () => {
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
    }
  });

  it('refuses a profile over maxProfileBytes (16 KiB by default) in one line, and stores nothing', async () => {
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
    } finally {
      await t.close();
      await small.close();
    }
  });
});
