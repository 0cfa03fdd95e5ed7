/**
 * Resume tokens and who is logged in: resuming on a new connection,
 * `this.userId` in methods and publications (subscriptions re-run on login
 * and logout), the user's own document published, logout and
 * logoutOtherClients closing the connections that used a removed token (and
 * such a connection not resumable), a token removed directly in the database, expiry, and a logout through one
 * server closing a connection on another server that learns of it only from
 * the users collection.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Collection } from '../src/collections/collection.js';
import { openDatabase, type Database } from '../src/collections/database.js';
import { accounts } from '../src/accounts/index.js';
import { hashLoginToken } from '../src/accounts/resume-tokens.js';
import { createServer } from '../src/server/app.js';
import type { User } from '../src/accounts/users.js';
import type { PerseidServer } from '../src/server/app.js';
import { embeddedTarget, mongoTargets, type DatabaseTarget } from './databases.js';
import { accountsServer, call, digest, errorOf, type AccountsServer } from './accounts-helpers.js';
import { RawPeer, type Message } from './helpers.js';
import { eventually } from './processes.js';
import { needsServices } from './skips.js';

const { targets } = await mongoTargets();
// Both MongoDB-wire stand-ins differ from MongoDB where accounts depend on it (checked with the official
// driver alone): mongo-java-server answers a query on `services.resume.loginTokens.hashedToken` with nothing
// once that path (through an array of sub-documents) is indexed, as Meteor's users collection is; FerretDB
// acknowledges `$pull` with a condition (`{$pull: {loginTokens: {hashedToken: h}}}`) but removes nothing.
for (const server of new Set(targets.map((t) => t.server))) {
  const why = server === 'ferretdb' ? '$pull with a condition removes nothing there' : 'its indexes on paths through arrays of sub-documents hide matching documents from queries';
  describe(`accounts resume suite on ${server}`, { skip: why }, () => undefined);
}
const perServer: DatabaseTarget[] = [embeddedTarget()];

function withNotes(server: PerseidServer, database: Database): void {
  const notes = new Collection<{ owner: string; text: string }>('notes', { database });
  server.methods({
    async addNote(this: { userId: string | null }, text: unknown) {
      return notes.insertAsync({ owner: this.userId ?? 'nobody', text: String(text) });
    },
  });
  server.publish('myNotes', function () {
    return notes.find({ owner: this.userId ?? 'nobody' });
  });
}

async function loggedIn(t: AccountsServer, username: string): Promise<{ peer: RawPeer; reply: Message }> {
  const peer = await RawPeer.connected(t.wsUrl);
  const result = await call(peer, 'login', { user: { username }, password: digest('pw') });
  assert.ok(result.result, `login failed: ${JSON.stringify(result.error)}`);
  return { peer, reply: result.result as Message };
}

for (const target of perServer) {
  describe(`accounts: resume tokens and logins on ${target.label}`, () => {
    let opened: Awaited<ReturnType<DatabaseTarget['open']>>;
    let t: AccountsServer;
    let users: Collection<User>;
    before(async () => {
      opened = await target.open();
      users = new Collection<User>('users', { database: opened.database });
      t = await accountsServer(opened.database, { defaultRateLimit: false }, (server) => withNotes(server, opened.database));
      for (const name of ['ann', 'bob', 'cat', 'dan', 'eve']) await t.accounts.createUser({ username: name, email: `${name}@example.com`, password: 'pw', profile: { n: name } });
    });
    after(async () => {
      await t?.close();
      await opened?.cleanup();
    });

    it("publishes the user's own document, re-runs subscriptions on login and logout, and resumes on a new connection", async () => {
      const peer = await RawPeer.connected(t.wsUrl);
      peer.send({ msg: 'sub', id: 'n', name: 'myNotes' });
      await peer.next((m) => m.msg === 'ready');
      const reply = (await call(peer, 'login', { user: { username: 'ann' }, password: digest('pw') })).result as Message;
      const own = peer.received.find((m) => m.msg === 'added' && m.collection === 'users')!;
      assert.equal(own.id, reply.id);
      assert.deepEqual(Object.keys(own.fields as object).sort(), ['emails', 'profile', 'username'], 'no services, no createdAt');
      const noteId = (await call(peer, 'addNote', 'mine')).result;
      // A method's writes reach its subscriptions before its `updated`.
      const addedNote = (m: Message) => m.msg === 'added' && m.collection === 'notes' && m.id === noteId;
      assert.ok(peer.received.some(addedNote), 'the note published to its owner');

      const again = await RawPeer.connected(t.wsUrl);
      again.send({ msg: 'sub', id: 'n', name: 'myNotes' });
      await again.next((m) => m.msg === 'ready');
      const resumed = (await call(again, 'login', { resume: reply.token })).result as Message;
      assert.deepEqual(resumed, { ...reply, type: 'resume' }, 'same id, token and expiry; type resume');
      assert.ok(again.received.some(addedNote), 'the subscription re-ran for the user before the login returned');
      assert.equal((await call(again, 'whoami')).result, reply.id);

      const before = peer.received.length;
      await call(peer, 'logout');
      const afterLogout = peer.received.slice(before);
      assert.ok(afterLogout.some((m) => m.msg === 'removed' && m.collection === 'notes' && m.id === noteId));
      assert.ok(afterLogout.some((m) => m.msg === 'removed' && m.collection === 'users' && m.id === reply.id));
      assert.equal((await call(peer, 'whoami')).result, null);
      // The token is gone: the other connection that used it is closed, and it cannot resume.
      await again.waitClosed();
      const third = await RawPeer.connected(t.wsUrl);
      assert.deepEqual(errorOf(await call(third, 'login', { resume: reply.token })), { error: 403, reason: "You've been logged out by the server. Please log in again." });
      peer.close();
      third.close();
    });

    it('logoutOtherClients (getNewToken, removeOtherTokens) closes the other connection and keeps this one', async () => {
      const a = await loggedIn(t, 'bob');
      const b = await loggedIn(t, 'bob');
      const fresh = (await call(a.peer, 'getNewToken')).result as Message;
      assert.notEqual(fresh.token, a.reply.token);
      assert.deepEqual(fresh.tokenExpires, a.reply.tokenExpires, "the new token keeps the old one's time");
      assert.equal((await call(a.peer, 'removeOtherTokens')).error, undefined);
      await b.peer.waitClosed();
      assert.equal((await call(a.peer, 'whoami')).result, a.reply.id);
      const tokens = (await users.findOneAsync({ username: 'bob' }))!.services!.resume!.loginTokens!;
      assert.deepEqual(tokens.map((x) => x.hashedToken), [hashLoginToken(fresh.token as string)]);
      const anon = await RawPeer.connected(t.wsUrl);
      assert.deepEqual(errorOf(await call(anon, 'removeOtherTokens')), { error: 'You are not logged in.', reason: undefined });
      a.peer.close();
      anon.close();
    });

    it('a connection closed for a removed token cannot be resumed (Meteor 3.5) into its login', async () => {
      await t.accounts.createUser({ username: 'fay', password: 'pw' });
      const thief = await loggedIn(t, 'fay');
      const session = (thief.peer.received.find((m) => m.msg === 'connected') as Message).session as string;
      const received = thief.peer.received.filter((m) => m.msg !== 'ping' && m.msg !== 'pong').length;
      // It never reads the server's close frame, so the server waits for its answer with the session still open.
      thief.peer.ws.pause();
      const owner = await loggedIn(t, 'fay');
      const closing = t.accounts.loggedInConnections - 1;
      assert.equal((await call(owner.peer, 'removeOtherTokens')).error, undefined);
      await eventually(() => t.accounts.loggedInConnections === closing, 'the thief logged out');
      const again = await RawPeer.open(t.wsUrl);
      again.send({ msg: 'connect', version: '1', support: ['1'], session, receivedCount: received });
      assert.notEqual((await again.next((m) => m.msg === 'connected')).session, session, 'a fresh session');
      assert.equal((await call(again, 'whoami')).result, null, 'not logged in');
      again.close();
      owner.peer.close();
      thief.peer.ws.terminate();
    });

    it('logs a connection out when its token is removed directly in the database', async () => {
      const { peer, reply } = await loggedIn(t, 'cat');
      await users.updateAsync({ _id: reply.id as string }, { $pull: { 'services.resume.loginTokens': { hashedToken: hashLoginToken(reply.token as string) } } });
      assert.ok(await peer.waitClosed(10000));
    });

    it('refuses an expired token, and the purge logs out connections whose token expired', async () => {
      const old = new Date(Date.now() - 91 * 86400000);
      await users.updateAsync({ username: 'dan' }, { $push: { 'services.resume.loginTokens': { hashedToken: hashLoginToken('expired-token'), when: old } } });
      const peer = await RawPeer.connected(t.wsUrl);
      assert.deepEqual(errorOf(await call(peer, 'login', { resume: 'expired-token' })), { error: 403, reason: 'Your session has expired. Please log in again.' });
      const { peer: live } = await loggedIn(t, 'dan');
      // A purge run a day past the live token's expiry removes both tokens.
      assert.ok((await t.accounts.tokens.expire(Date.now() + 91 * 86400000)) >= 1);
      await live.waitClosed(10000);
      assert.deepEqual((await users.findOneAsync({ username: 'dan' }))!.services!.resume!.loginTokens, []);
      peer.close();
    });

    it('a logout through one server closes the connection on another server that used the token', async () => {
      // A second server with accounts of its own over the same database: it learns of the logout only from the collection.
      const other = await accountsServer(opened.database, { defaultRateLimit: false });
      try {
        const { peer: here, reply } = await loggedIn(t, 'eve');
        const there = await RawPeer.connected(other.wsUrl);
        assert.equal(((await call(there, 'login', { resume: reply.token })).result as Message).id, reply.id);
        assert.equal(other.accounts.loggedInConnections, 1);
        await call(here, 'logout');
        await there.waitClosed(10000);
        here.close();
      } finally {
        await other.close();
      }
    });
  });

  describe(`accounts: login tokens per user are bounded on ${target.label}`, () => {
    it("a login beyond maxLoginTokensPerUser ends the user's oldest token, and getNewToken floods add none beyond it", async () => {
      const opened = await target.open();
      const t = await accountsServer(opened.database, { defaultRateLimit: false, maxLoginTokensPerUser: 3 });
      try {
        const userId = await t.accounts.createUser({ username: 'max', password: 'pw' });
        const tokens = async () => (await t.accounts.users.findOneAsync({ _id: userId }))!.services!.resume!.loginTokens!.map((x) => x.hashedToken);
        const first = await loggedIn(t, 'max');
        const later = [await loggedIn(t, 'max'), await loggedIn(t, 'max')];
        assert.equal((await tokens()).length, 3);
        const fourth = await loggedIn(t, 'max');
        await first.peer.waitClosed(10000);
        const kept = await tokens();
        assert.deepEqual(kept, [...later, fourth].map((l) => hashLoginToken(l.reply.token as string)), 'the oldest token went, the three newest stay');
        const other = await RawPeer.connected(t.wsUrl);
        assert.equal(errorOf(await call(other, 'login', { resume: first.reply.token }))?.error, 403);
        for (let i = 0; i < 20; i++) assert.ok((await call(fourth.peer, 'getNewToken')).result);
        assert.equal((await tokens()).length, 3);
        assert.ok((await tokens()).includes(hashLoginToken(fourth.reply.token as string)) === false, "getNewToken's tokens pushed out the older ones too");
        for (const l of [...later, fourth]) l.peer.close();
        other.close();
      } finally {
        await t.close();
        await opened.cleanup();
      }
    });

    it('refuses a bound that is not a whole number of at least 1, in one line', () => {
      for (const bad of [0, -1, 2.5, Number.NaN]) {
        assert.throws(() => accounts(createServer(), { maxLoginTokensPerUser: bad }), { name: 'TypeError', message: `accounts: maxLoginTokensPerUser must be a whole number of at least 1 (got ${bad})` });
      }
    });
  });
}

// Two servers, each with its own connection to a MongoDB-wire database and its own change feed: a password
// set through one (which removes every token with `$set`, which FerretDB applies) closes the connection that
// resumed on the other.
const ferret = targets.find((target) => target.server === 'ferretdb' && target.source === 'poll');
describe('accounts across two servers on FerretDB', { skip: needsServices({ ferretdb: ferret?.label }) }, () => {
  it('a password set through one server logs out the connection that resumed on the other', async () => {
    const opened = await ferret!.open();
    const second = await openDatabase({ mongoUrl: opened.url!, changeSource: 'poll', pollIntervalMs: 200 });
    const a = await accountsServer(opened.database, { defaultRateLimit: false });
    const b = await accountsServer(second, { defaultRateLimit: false });
    try {
      const userId = await a.accounts.createUser({ username: 'zoe', password: 'pw' });
      const { peer: here, reply } = await loggedIn(a, 'zoe');
      const there = await RawPeer.connected(b.wsUrl);
      assert.equal(((await call(there, 'login', { resume: reply.token })).result as Message).id, userId);
      await a.accounts.setPassword(userId, 'new password');
      await there.waitClosed(10000);
      await here.waitClosed(10000);
      assert.deepEqual(errorOf(await call(await RawPeer.connected(b.wsUrl), 'login', { resume: reply.token })), { error: 403, reason: "You've been logged out by the server. Please log in again." });
    } finally {
      await a.close();
      await b.close();
      await second.close();
      await opened.cleanup();
    }
  });
});
