/**
 * Accounts over the wire with Meteor's exact shapes: createUser and login
 * (digest, plain string, by username, e-mail or id), the stored document and
 * indexes, a bcrypt hash made by another implementation of Meteor's algorithm,
 * errors (ambiguous by default), hooks, changePassword, the default rate
 * limit, password reset and e-mail verification (also through real SMTP).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { SMTPServer } from 'smtp-server';
import { Collection } from '../src/collections/collection.js';
import { accounts } from '../src/accounts/index.js';
import type { AccountsEmail } from '../src/accounts/mailer.js';
import type { User } from '../src/accounts/users.js';
import { embeddedTarget } from './databases.js';
import { AMBIGUOUS, accountsServer, call, digest, errorOf, type AccountsServer } from './accounts-helpers.js';
import { RawPeer, type Message } from './helpers.js';
import { eventually } from './processes.js';

/** bcrypt of SHA-256("meteor-password") hex, made with pyca/bcrypt (an independent implementation), as Meteor stores it. */
const METEOR_HASHES = {
  b10: '$2b$10$Q9V9nkZDxbgtpMxzfjLI6O2Nj9IlitTLSqpF4in6BafRgVZ/CcMQa',
  a10: '$2a$10$Z/cuE4D4Hf5DGZ54rsAwpuJwbzJKPx6s4i/MfqWjefeBDU14Iv1YK',
  b12: '$2b$12$hil1TuV0SE0E7sI2Q.zDw.qCduGh5RjsXiuFaDd0vqH6UtuLV5eiq',
};

describe('accounts: passwords and users (embedded store)', () => {
  let opened: Awaited<ReturnType<ReturnType<typeof embeddedTarget>['open']>>;
  let t: AccountsServer;
  let users: Collection<User>;
  const mails: AccountsEmail[] = [];
  const events: string[] = [];

  before(async () => {
    opened = await embeddedTarget().open();
    users = new Collection<User>('users', { database: opened.database });
    t = await accountsServer(opened.database, { mailer: (m) => void mails.push(m), defaultRateLimit: false, sendVerificationEmail: true }, (_server, acc) => {
      acc.onLogin((a) => void events.push(`login:${a.type}:${a.methodName}`));
      acc.onLoginFailure((a) => void events.push(`failure:${a.type}:${(a.error as { reason?: string }).reason}`));
      acc.onLogout((e) => void events.push(`logout:${e.user?.username}`));
      acc.validateLoginAttempt((a) => a.user?.username !== 'banned');
      acc.validateNewUser((user) => user.username !== 'reserved');
    });
  });
  after(async () => {
    await t.close();
    await opened.cleanup();
  });

  it("creates a user with Meteor's document shape and logs the connection in", async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    const result = await call(peer, 'createUser', { username: 'ada', email: 'Ada@Example.com', password: digest('s3cret'), profile: { name: 'Ada' } });
    const reply = result.result as Message;
    assert.deepEqual(Object.keys(reply).sort(), ['id', 'token', 'tokenExpires', 'type']);
    assert.equal(reply.type, 'password');
    assert.match(reply.token as string, /^[A-Za-z0-9_-]{43}$/);
    const expires = (reply.tokenExpires as { $date: number }).$date;
    assert.ok(Math.abs(expires - (Date.now() + 90 * 86400000)) < 60000, 'expires in 90 days');
    assert.equal((await call(peer, 'whoami')).result, reply.id);

    const doc = (await users.findOneAsync({ _id: reply.id as string }))!;
    assert.deepEqual(Object.keys(doc).sort(), ['_id', 'createdAt', 'emails', 'profile', 'services', 'username']);
    assert.deepEqual(doc.emails, [{ address: 'Ada@Example.com', verified: false }]);
    assert.deepEqual(doc.profile, { name: 'Ada' });
    assert.match(doc.services!.password!.bcrypt!, /^\$2[ab]\$10\$/);
    const [token] = doc.services!.resume!.loginTokens!;
    assert.equal(token!.hashedToken, createHash('sha256').update(reply.token as string).digest('base64'));
    assert.ok(token!.when instanceof Date);
    assert.ok(!JSON.stringify(doc).includes(reply.token as string), 'the token itself is not stored');
    assert.equal(mails.at(-1)?.kind, 'verifyEmail', 'sendVerificationEmail mails the new address');
    peer.close();
  });

  it('logs in by username, e-mail (any case) or id, with a digest or a plain string', async () => {
    const ada = (await users.findOneAsync({ username: 'ada' }))!;
    for (const user of [{ username: 'ada' }, { email: 'ada@example.com' }, { id: ada._id }]) {
      for (const password of [digest('s3cret'), 's3cret']) {
        const peer = await RawPeer.connected(t.wsUrl);
        const result = await call(peer, 'login', { user, password });
        assert.equal((result.result as Message | undefined)?.id, ada._id, `${JSON.stringify(user)} ${typeof password}`);
        peer.close();
      }
    }
  });

  it('verifies bcrypt hashes made by another implementation of Meteor\'s algorithm ($2a$, $2b$, cost 12 re-hashed at 10)', async () => {
    for (const [name, hash] of Object.entries(METEOR_HASHES)) {
      await users.insertAsync({ _id: `meteor-${name}`, username: `meteor-${name}`, createdAt: new Date(), services: { password: { bcrypt: hash } } });
      const peer = await RawPeer.connected(t.wsUrl);
      const result = await call(peer, 'login', { user: { username: `meteor-${name}` }, password: digest('meteor-password') });
      assert.equal((result.result as Message | undefined)?.id, `meteor-${name}`, name);
      assert.deepEqual(errorOf(await call(peer, 'login', { user: { username: `meteor-${name}` }, password: digest('wrong') })), AMBIGUOUS);
      peer.close();
    }
    // Re-hashed at Meteor's cost after a successful login.
    for (let i = 0; i < 100; i++) {
      if ((await users.findOneAsync({ _id: 'meteor-b12' }))!.services!.password!.bcrypt!.startsWith('$2b$10$')) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.match((await users.findOneAsync({ _id: 'meteor-b12' }))!.services!.password!.bcrypt!, /^\$2[ab]\$10\$/);
  });

  it('answers failures with one ambiguous message, malformed requests with Match failed', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    assert.deepEqual(errorOf(await call(peer, 'login', { user: { username: 'nobody' }, password: digest('x') })), AMBIGUOUS);
    assert.deepEqual(errorOf(await call(peer, 'login', { user: { username: 'ada' }, password: digest('wrong') })), AMBIGUOUS);
    assert.deepEqual(errorOf(await call(peer, 'createUser', { username: 'ADA', password: digest('x') })), AMBIGUOUS);
    const matchFailed = { error: 400, reason: 'Match failed' };
    assert.deepEqual(errorOf(await call(peer, 'login', { user: { username: 'ada', email: 'ada@example.com' }, password: digest('s3cret') })), matchFailed, 'exactly one user field');
    assert.deepEqual(errorOf(await call(peer, 'login', { user: { username: 'ada' }, password: { digest: 'short', algorithm: 'sha-256' } })), matchFailed);
    assert.deepEqual(errorOf(await call(peer, 'login', { user: { username: 'ada' }, password: 'x'.repeat(257) })), matchFailed);
    assert.deepEqual(errorOf(await call(peer, 'login', 'not an object')), matchFailed);
    // Names longer than 256 characters never become a lookup (100,000 made a regular expression too large to compile).
    assert.deepEqual(errorOf(await call(peer, 'login', { user: { username: 'z'.repeat(100_000) }, password: digest('x') })), matchFailed);
    assert.deepEqual(errorOf(await call(peer, 'login', { user: { email: `${'z'.repeat(300)}@example.com` }, password: digest('x') })), matchFailed);
    assert.deepEqual(errorOf(await call(peer, 'createUser', { username: 'z'.repeat(257), password: digest('x') })), matchFailed);
    assert.deepEqual(errorOf(await call(peer, 'forgotPassword', { email: `${'z'.repeat(300)}@example.com` })), matchFailed);
    // Query operators where strings belong never reach a selector.
    assert.deepEqual(errorOf(await call(peer, 'login', { user: { username: { $ne: null } }, password: digest('x') })), matchFailed);
    assert.deepEqual(errorOf(await call(peer, 'login', { resume: { $ne: null } })), matchFailed);
    assert.deepEqual(errorOf(await call(peer, 'createUser', { username: { $gt: '' }, password: digest('x') })), matchFailed);
    assert.deepEqual(errorOf(await call(peer, 'resetPassword', { $ne: null }, digest('x'))), matchFailed);
    assert.deepEqual(errorOf(await call(peer, 'verifyEmail', { $ne: null })), matchFailed);
    assert.deepEqual(errorOf(await call(peer, 'forgotPassword', { email: { $regex: '.' } })), matchFailed);
    assert.deepEqual(errorOf(await call(peer, 'login', { user: { username: 'ada' }, password: digest('s3cret'), extra: 1 })), matchFailed);
    assert.deepEqual(errorOf(await call(peer, 'login', { foo: 1 })), { error: 400, reason: 'Unrecognized options for login request' });
    assert.deepEqual(errorOf(await call(peer, 'createUser', { password: digest('x') })), { error: 400, reason: 'Need to set a username or email' });
    assert.deepEqual(errorOf(await call(peer, 'createUser', { username: 'reserved', password: digest('x') })), { error: 403, reason: 'User validation failed' });
    assert.equal((await call(peer, 'whoami')).result, null, 'still logged out');
    peer.close();
  });

  it('runs validateLoginAttempt, onLogin, onLoginFailure and onLogout', async () => {
    events.length = 0;
    const peer = await RawPeer.connected(t.wsUrl);
    await call(peer, 'createUser', { username: 'banned', password: digest('pw') });
    assert.deepEqual(errorOf(await call(peer, 'login', { user: { username: 'banned' }, password: digest('pw') })), { error: 403, reason: 'Login forbidden' });
    await call(peer, 'login', { user: { username: 'ada' }, password: digest('s3cret') });
    await call(peer, 'logout');
    assert.deepEqual(events, ['failure:password:Login forbidden', 'failure:password:Login forbidden', 'login:password:login', 'logout:ada']);
    peer.close();
  });

  it('changes a password: the old one stops working, other sessions are logged out, this one stays', async () => {
    const [a, b] = [await RawPeer.connected(t.wsUrl), await RawPeer.connected(t.wsUrl)];
    await call(a, 'createUser', { username: 'grace', password: digest('old') });
    await call(b, 'login', { user: { username: 'grace' }, password: digest('old') });
    assert.deepEqual(errorOf(await call(a, 'changePassword', digest('wrong'), digest('new'))), AMBIGUOUS);
    assert.deepEqual((await call(a, 'changePassword', digest('old'), digest('new'))).result, { passwordChanged: true });
    await b.waitClosed();
    assert.ok((await call(a, 'whoami')).result, 'the changing connection stays logged in');
    const c = await RawPeer.connected(t.wsUrl);
    assert.deepEqual(errorOf(await call(c, 'login', { user: { username: 'grace' }, password: digest('old') })), AMBIGUOUS);
    assert.ok(((await call(c, 'login', { user: { username: 'grace' }, password: digest('new') })).result as Message).id);
    assert.deepEqual(errorOf(await call(await RawPeer.connected(t.wsUrl), 'changePassword', digest('new'), digest('x'))), { error: 401, reason: 'Must be logged in' });
    a.close();
    c.close();
  });

  it('resets a password through the mailed token, which logs in and works once', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    await call(peer, 'createUser', { username: 'lin', email: 'lin@example.com', password: digest('forgotten') });
    mails.length = 0;
    assert.equal((await call(peer, 'forgotPassword', { email: 'LIN@example.com' })).error, undefined);
    const mail = mails[0]!;
    assert.equal(mail.kind, 'resetPassword');
    assert.equal(mail.to, 'lin@example.com');
    const token = /#\/reset-password\/(.+)$/.exec(mail.url)![1]!;
    assert.ok(mail.text.includes(mail.url));
    const stored = (await users.findOneAsync({ username: 'lin' }))!.services!.password!.reset!;
    assert.notEqual(stored.token, token, 'stored hashed');
    const other = await RawPeer.connected(t.wsUrl);
    const result = await call(other, 'resetPassword', token, digest('remembered'));
    assert.equal((result.result as Message).type, 'password');
    await peer.waitClosed(); // every earlier session of the user is logged out
    assert.deepEqual(errorOf(await call(other, 'resetPassword', token, digest('again'))), { error: 403, reason: 'Token expired' });
    assert.deepEqual((await users.findOneAsync({ username: 'lin' }))!.emails, [{ address: 'lin@example.com', verified: true }]);
    assert.deepEqual(errorOf(await call(other, 'forgotPassword', { email: 'nobody@example.com' })), AMBIGUOUS);
    other.close();
  });

  it('verifies an e-mail address through the mailed token', async () => {
    mails.length = 0;
    const peer = await RawPeer.connected(t.wsUrl);
    const created = (await call(peer, 'createUser', { email: 'v@example.com', password: digest('pw') })).result as Message;
    const token = /#\/verify-email\/(.+)$/.exec(mails[0]!.url)![1]!;
    const other = await RawPeer.connected(t.wsUrl);
    assert.equal(((await call(other, 'verifyEmail', token)).result as Message).id, created.id);
    assert.deepEqual((await users.findOneAsync({ _id: created.id as string }))!.emails, [{ address: 'v@example.com', verified: true }]);
    assert.deepEqual(errorOf(await call(other, 'verifyEmail', token)), { error: 403, reason: 'Verify email link expired' });
    // Nothing left to verify: no mail, as in Meteor (it mailed the verified address again).
    await assert.rejects(t.accounts.sendVerificationEmail(created.id as string), { message: 'That user has no unverified email addresses.' });
    assert.equal(mails.length, 1);
    peer.close();
    other.close();
  });

  it("mails nothing from the server's createUser, as Meteor's: an app's enrollment sends one link, and it sets the password", async () => {
    mails.length = 0;
    const id = await t.accounts.createUser({ email: 'enrol@example.com' });
    assert.deepEqual(mails.map((m) => m.kind), [], 'only the createUser method mails (sendVerificationEmail is on)');
    const token = await t.accounts.sendEnrollmentEmail(id);
    assert.deepEqual(mails.map((m) => [m.kind, m.to]), [['enrollAccount', 'enrol@example.com']]);
    const peer = await RawPeer.connected(t.wsUrl);
    assert.equal(((await call(peer, 'resetPassword', token, digest('chosen'))).result as Message).id, id);
    assert.equal(((await call(peer, 'login', { user: { email: 'enrol@example.com' }, password: digest('chosen') })).result as Message).id, id);
    peer.close();
  });

  it('enforces the unique sparse indexes on array paths in the embedded store', async () => {
    await assert.rejects(users.insertAsync({ _id: 'dup', emails: [{ address: 'lin@example.com', verified: false }] }), { code: 11000 });
    await users.insertAsync({ _id: 't1', services: { resume: { loginTokens: [{ hashedToken: 'h', when: new Date() }] } } });
    await assert.rejects(users.insertAsync({ _id: 't2', services: { resume: { loginTokens: [{ hashedToken: 'h', when: new Date() }] } } }), { code: 11000 });
    // Sparse: many users without tokens, or with an empty list, are fine.
    await users.insertAsync({ _id: 'e1', services: { resume: { loginTokens: [] } } });
    await users.insertAsync({ _id: 'e2', services: { resume: { loginTokens: [] } } });
    await users.insertAsync({ _id: 'n1' });
    await users.insertAsync({ _id: 'n2' });
  });
});

/** argon2id of SHA-256("meteor-password") hex with Meteor's parameters, made with argon2-cffi (another implementation). */
const ARGON2_VECTOR = '$argon2id$v=19$m=19456,t=2,p=1$tHDgN6zozTZ/NhfNCWT/vQ$qSvl8TfrHvdk/pYY0ktWuukxG95qegMIduqJ4PJyFf4';

async function eventuallyStored(users: Collection<User>, id: string, test: (password: NonNullable<NonNullable<User['services']>['password']>) => boolean): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (test((await users.findOneAsync({ _id: id }))!.services!.password!)) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`stored password of ${id} never became as expected: ${JSON.stringify((await users.findOneAsync({ _id: id }))!.services!.password)}`);
}

describe('accounts: argon2 (argon2Enabled)', () => {
  let opened: Awaited<ReturnType<ReturnType<typeof embeddedTarget>['open']>>;
  before(async () => {
    opened = await embeddedTarget().open();
  });
  after(() => opened.cleanup());

  it("hashes new passwords with argon2id at Meteor's parameters, verifies another implementation's hash, and moves bcrypt users over at login", async () => {
    const users = new Collection<User>('users', { database: opened.database });
    const t = await accountsServer(opened.database, { argon2Enabled: true, defaultRateLimit: false });
    try {
      const id = await t.accounts.createUser({ username: 'argo', password: 'pw' });
      const stored = (await users.findOneAsync({ _id: id }))!.services!.password!;
      assert.match(stored.argon2!, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
      assert.equal(stored.bcrypt, undefined);
      await users.insertAsync({ _id: 'cffi', username: 'cffi', services: { password: { argon2: ARGON2_VECTOR } } });
      await users.insertAsync({ _id: 'old', username: 'old', services: { password: { bcrypt: METEOR_HASHES.b10 } } });
      const peer = await RawPeer.connected(t.wsUrl);
      for (const [username, password] of [['argo', 'pw'], ['cffi', 'meteor-password'], ['old', 'meteor-password']]) {
        assert.ok((await call(peer, 'login', { user: { username }, password: digest(password!) })).result, username);
        assert.deepEqual(errorOf(await call(peer, 'login', { user: { username }, password: digest('wrong') })), AMBIGUOUS);
      }
      await eventuallyStored(users, 'old', (p) => p.bcrypt === undefined && /^\$argon2id\$/.test(p.argon2 ?? ''));
      assert.ok((await call(peer, 'login', { user: { username: 'old' }, password: digest('meteor-password') })).result, 'logs in with the new hash');
      peer.close();
    } finally {
      await t.close();
    }
    // Turned off again: argon2 users still log in, and move back to bcrypt.
    const back = await accountsServer(opened.database, { defaultRateLimit: false });
    try {
      const peer = await RawPeer.connected(back.wsUrl);
      assert.ok((await call(peer, 'login', { user: { username: 'cffi' }, password: digest('meteor-password') })).result);
      await eventuallyStored(users, 'cffi', (p) => p.argon2 === undefined && /^\$2[ab]\$10\$/.test(p.bcrypt ?? ''));
      peer.close();
    } finally {
      await back.close();
    }
  });
});

describe('accounts: failed logins in numbers', () => {
  it("keep other clients' calls answered: 60 at once, from 12 connections within the rate limit", async () => {
    const opened = await embeddedTarget().open();
    const t = await accountsServer(opened.database);
    try {
      const bystander = await RawPeer.connected(t.wsUrl);
      const attackers = await Promise.all(Array.from({ length: 12 }, () => RawPeer.connected(t.wsUrl)));
      // Sent at once; their answers may take a while (they wait their turn), the bystander's may not.
      const attempts = attackers.map(async (peer, p) => {
        for (let i = 0; i < 5; i++) peer.send({ msg: 'method', id: `l${i}`, method: 'login', params: [{ user: { username: `nobody${p}-${i}` }, password: digest('wrong') }] });
        const results: Message[] = [];
        while (results.length < 5) results.push(await peer.next((m) => m.msg === 'result', 30000));
        return results;
      });
      let slowest = 0;
      let settled = false;
      const all = Promise.all(attempts).finally(() => (settled = true));
      for (let i = 0; !settled; i++) {
        const started = performance.now();
        await bystander.call(`w${i}`, 'whoami');
        slowest = Math.max(slowest, performance.now() - started);
      }
      for (const result of (await all).flat()) assert.deepEqual(errorOf(result), AMBIGUOUS);
      assert.ok(slowest < 1000, `the bystander's slowest call took ${Math.round(slowest)} ms`);
      for (const peer of [bystander, ...attackers]) peer.close();
    } finally {
      await t.close();
      await opened.cleanup();
    }
  });
  it('keep a login from another address from waiting behind them: hashing takes turns between addresses', async () => {
    const opened = await embeddedTarget().open();
    const t = await accountsServer(opened.database);
    try {
      await t.accounts.createUser({ username: 'grace', password: digest('right') });
      // A connection runs its calls one after another: many connections, one login each, queue many hashes at once.
      const attackers = await Promise.all(Array.from({ length: 60 }, () => RawPeer.connected(t.wsUrl)));
      for (const [p, peer] of attackers.entries()) peer.send({ msg: 'method', id: 'l', method: 'login', params: [{ user: { username: `nobody${p}` }, password: digest('wrong') }] });
      const answered = () => attackers.reduce((n, peer) => n + peer.received.filter((m) => m.msg === 'result').length, 0);
      // The attackers' 60 hashes are queued once the first is answered.
      await attackers[0]!.next((m) => m.msg === 'result', 30000);
      // From another loopback address: another client.
      const genuine = await RawPeer.open(t.wsUrl, { localAddress: '127.0.0.2' });
      genuine.send({ msg: 'connect', version: '1', support: ['1'] });
      await genuine.next((m) => m.msg === 'connected');
      const before = answered();
      const login = await call(genuine, 'login', { user: { username: 'grace' }, password: digest('right') });
      assert.equal((login.result as { id?: string } | undefined)?.id, (await t.accounts.findUserByUsername('grace'))!._id);
      const overtaken = answered() - before;
      // In arrival order it would wait for every attacker's hash still queued (over 50). Taking turns, each of its
      // steps (reading the user, its hash, storing its token) waits for one hash already under way at most.
      assert.ok(overtaken < 20, `${overtaken} of the attackers' logins were answered while the genuine one waited`);
      for (const peer of [genuine, ...attackers]) peer.close();
    } finally {
      await t.close();
      await opened.cleanup();
    }
  });
});

describe('accounts: connections that close while their login runs', () => {
  it('keep nothing for them: a login finishing after its connection closed leaves no session nor token watch', async () => {
    const opened = await embeddedTarget().open();
    let logins = 0;
    const t = await accountsServer(opened.database, {}, (_server, acc) => acc.onLogin(() => void logins++));
    try {
      await t.accounts.createUser({ username: 'ivy', password: digest('right') });
      // Each connection sends a login and leaves at once: its hash (waiting behind the others') ends after the close.
      const peers = await Promise.all(Array.from({ length: 10 }, () => RawPeer.connected(t.wsUrl)));
      for (const peer of peers) {
        peer.send({ msg: 'method', id: 'l', method: 'login', params: [{ user: { username: 'ivy' }, password: digest('right') }] });
        peer.close();
      }
      await eventually(() => logins === 10, 'the ten logins to finish', 20000);
      await eventually(() => t.server.sessionCount + t.server.awaitingResumeCount === 0, 'the connections to close');
      assert.equal(t.accounts.loggedInConnections, 0);
    } finally {
      await t.close();
      await opened.cleanup();
    }
  });
});

describe('accounts: options', () => {
  let opened: Awaited<ReturnType<ReturnType<typeof embeddedTarget>['open']>>;
  before(async () => {
    opened = await embeddedTarget().open();
  });
  after(() => opened.cleanup());

  it("publishes the user's own document with defaultFieldSelector: inclusions add fields, Meteor's {services: 0} changes nothing", async () => {
    for (const [defaultFieldSelector, published] of [
      [{ services: 0 }, ['emails', 'profile', 'username']],
      [{ createdAt: 1 }, ['createdAt', 'emails', 'profile', 'username']],
    ] as const) {
      const t = await accountsServer(opened.database, { defaultFieldSelector, defaultRateLimit: false });
      try {
        const peer = await RawPeer.connected(t.wsUrl);
        const name = `fields${published.length}`;
        // No password: no bcrypt turn to wait for behind the hashes earlier tests left queued for this address.
        const { id } = (await call(peer, 'createUser', { username: name, email: `${name}@example.com`, profile: { name } })).result as { id: string };
        // A login's subscription re-run is sent before its result.
        const own = peer.received.find((m) => m.msg === 'added' && m.collection === 'users' && m.id === id);
        assert.deepEqual(Object.keys((own?.fields ?? {}) as object).sort(), published);
        peer.close();
      } finally {
        await t.close();
      }
    }
  });

  it('refuses options given to a second accounts(server) call, which could not take effect', async () => {
    const t = await accountsServer(opened.database, { defaultRateLimit: false });
    try {
      assert.equal(accounts(t.server), t.accounts, 'without options: the same Accounts');
      assert.throws(() => accounts(t.server, { forbidClientAccountCreation: true }), { message: /already called for this server: give every option at the first call/ });
      const peer = await RawPeer.connected(t.wsUrl);
      assert.ok((await call(peer, 'createUser', { username: 'second-call' })).result, 'sign-ups as the first call set');
      peer.close();
    } finally {
      await t.close();
    }
  });

  it('gives precise errors with ambiguousErrorMessages off, and forbids client sign-ups when asked', async () => {
    const t = await accountsServer(opened.database, { ambiguousErrorMessages: false, forbidClientAccountCreation: true, defaultRateLimit: false });
    try {
      await t.accounts.createUser({ username: 'sam', email: 'sam@example.com', password: 'pw' });
      const peer = await RawPeer.connected(t.wsUrl);
      assert.deepEqual(errorOf(await call(peer, 'login', { user: { username: 'nobody' }, password: digest('x') })), { error: 403, reason: 'User not found' });
      assert.deepEqual(errorOf(await call(peer, 'login', { user: { username: 'sam' }, password: digest('x') })), { error: 403, reason: 'Incorrect password' });
      assert.deepEqual(errorOf(await call(peer, 'createUser', { username: 'new', password: digest('x') })), { error: 403, reason: 'Signups forbidden' });
      await assert.rejects(t.accounts.createUser({ username: 'SAM' }), { reason: 'Username already exists.' });
      await assert.rejects(t.accounts.createUser({ username: 'other', email: 'SAM@example.com' }), { reason: 'Email already exists.' });
      await t.accounts.createUser({ username: 'nopw' });
      assert.deepEqual(errorOf(await call(peer, 'login', { user: { username: 'nopw' }, password: digest('x') })), { error: 403, reason: 'User has no password set' });
      peer.close();
    } finally {
      await t.close();
    }
  });

  it('takes as long to refuse an unknown user, or one without a password, as a wrong password', async () => {
    // Cost 12: a bcrypt check then takes a few hundred ms, far above the noise of a shared machine.
    const t = await accountsServer(opened.database, { bcryptRounds: 12, defaultRateLimit: false });
    try {
      await t.accounts.createUser({ username: 'timed', password: 'right' });
      await t.accounts.createUser({ username: 'timed-nopw' });
      const peer = await RawPeer.connected(t.wsUrl);
      const timed = async (username: string) => {
        const start = performance.now();
        assert.deepEqual(errorOf(await call(peer, 'login', { user: { username }, password: digest('wrong') })), AMBIGUOUS);
        return performance.now() - start;
      };
      await timed('nobody'); // the first refusal of an unknown user may make the decoy hash
      const times: Record<string, number[]> = { existing: [], unknown: [], noPassword: [] };
      for (let round = 0; round < 3; round++) {
        times.existing!.push(await timed('timed'));
        times.unknown!.push(await timed(`nobody-${round}`));
        times.noPassword!.push(await timed('timed-nopw'));
      }
      const median = (values: number[]) => [...values].sort((a, b) => a - b)[1]!;
      const wrongPassword = median(times.existing!);
      for (const kind of ['unknown', 'noPassword']) {
        assert.ok(median(times[kind]!) > wrongPassword / 2, `${kind}: ${JSON.stringify(times[kind])} ms, a wrong password ${JSON.stringify(times.existing)} ms`);
      }
      peer.close();
    } finally {
      await t.close();
    }
  });

  it("limits login methods to 5 per 10 s per connection by default (Meteor's rule)", async () => {
    const t = await accountsServer(opened.database);
    try {
      const peer = await RawPeer.connected(t.wsUrl);
      const reasons: unknown[] = [];
      for (let i = 0; i < 6; i++) reasons.push(errorOf(await call(peer, 'login', { user: { username: 'x' }, password: digest('x') }))?.error);
      assert.deepEqual(reasons, [403, 403, 403, 403, 403, 'too-many-requests']);
      const fresh = await RawPeer.connected(t.wsUrl);
      assert.equal(errorOf(await call(fresh, 'login', { user: { username: 'x' }, password: digest('x') }))?.error, 403, 'another connection has its own bucket');
      assert.equal(t.accounts.removeDefaultRateLimit(), true);
      assert.equal(errorOf(await call(peer, 'login', { user: { username: 'x' }, password: digest('x') }))?.error, 403);
      peer.close();
      fresh.close();
    } finally {
      await t.close();
    }
  });

  it("puts the app's links in e-mails: under siteUrl's #/ by default, or as the urls option (Meteor's Accounts.urls) builds them", async () => {
    const sent: AccountsEmail[] = [];
    const urls = { resetPassword: (token: string) => `https://app.example/reset/${token}`, verifyEmail: (token: string) => `https://app.example/verify?t=${token}` };
    const t = await accountsServer(opened.database, { mailer: (m) => void sent.push(m), siteUrl: 'https://app.example/', urls, defaultRateLimit: false });
    try {
      const id = await t.accounts.createUser({ username: 'links', email: 'links@example.com' });
      const tokens = [await t.accounts.sendResetPasswordEmail(id), await t.accounts.sendVerificationEmail(id), await t.accounts.sendEnrollmentEmail(id)];
      assert.deepEqual(
        sent.map((m) => m.url),
        [`https://app.example/reset/${tokens[0]}`, `https://app.example/verify?t=${tokens[1]}`, `https://app.example/#/enroll-account/${tokens[2]}`],
      );
      assert.ok(sent.every((m) => m.text.includes(m.url)));
    } finally {
      await t.close();
    }
  });

  it("puts links under http://localhost:<the port it listens on> without siteUrl or ROOT_URL, as Meteor's", async () => {
    const sent: AccountsEmail[] = [];
    const rootUrl = process.env.ROOT_URL;
    delete process.env.ROOT_URL;
    const t = await accountsServer(opened.database, { mailer: (m) => void sent.push(m), defaultRateLimit: false });
    try {
      const id = await t.accounts.createUser({ username: 'porty', email: 'porty@example.com' });
      const token = await t.accounts.sendResetPasswordEmail(id);
      assert.deepEqual(sent.map((m) => m.url), [`http://localhost:${new URL(t.url).port}/#/reset-password/${token}`]);
    } finally {
      if (rootUrl !== undefined) process.env.ROOT_URL = rootUrl;
      await t.close();
    }
  });

  it('sends e-mails over SMTP (nodemailer) when given an SMTP URL', async () => {
    const received: string[] = [];
    const smtp = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      onData(stream, _session, done) {
        let text = '';
        stream.on('data', (chunk: Buffer) => (text += chunk.toString()));
        stream.on('end', () => {
          received.push(text);
          done();
        });
      },
    });
    await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
    const { port } = smtp.server.address() as { port: number };
    const t = await accountsServer(opened.database, { mailer: undefined, mailUrl: `smtp://127.0.0.1:${port}`, siteUrl: 'https://tasks.example', defaultRateLimit: false });
    try {
      const id = await t.accounts.createUser({ username: 'mailme', email: 'mailme@example.com', password: 'pw' });
      const token = await t.accounts.sendResetPasswordEmail(id);
      assert.equal(received.length, 1);
      assert.ok(received[0]!.includes('To: mailme@example.com'));
      assert.ok(received[0]!.replace(/=\r\n/g, '').includes(`https://tasks.example/#/reset-password/${token}`));
    } finally {
      await t.close();
      await new Promise<void>((resolve) => smtp.close(() => resolve()));
    }
  });
});
