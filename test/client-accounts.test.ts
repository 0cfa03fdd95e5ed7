/**
 * AccountsClient over a real server with accounts: the login survives a
 * reconnect to a new session (the server forgot it; the client logs in again
 * with its token), with a storage and without one; and says logged out when
 * the token it shares with another tab is gone; and follows the links of
 * the accounts e-mails (reset, verification), logging in as they do.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AccountsClient, DDPClient, type TokenStorage } from '../src/client/node.js';
import { accounts, type AccountsEmail } from '../src/accounts/index.js';
import { startServer, type TestServer } from './helpers.js';

class MapStorage implements TokenStorage {
  readonly items = new Map<string, string>();
  getItem(key: string): string | null {
    return this.items.get(key) ?? null;
  }
  setItem(key: string, value: string): void {
    this.items.set(key, value);
  }
  removeItem(key: string): void {
    this.items.delete(key);
  }
}

describe('AccountsClient', () => {
  let t: TestServer;
  const clients: DDPClient[] = [];
  const mails: AccountsEmail[] = [];
  const tokenOf = (kind: AccountsEmail['kind']) => mails.findLast((m) => m.kind === kind)!.url.split('/').at(-1)!;

  before(async () => {
    t = await startServer(async (server) => {
      await accounts(server, { mailer: (mail) => void mails.push(mail), sendVerificationEmail: true }).ready;
      server.methods({
        whoami(this: { userId: string | null }) {
          return this.userId;
        },
      });
    });
  });
  after(async () => {
    for (const client of clients) client.disconnect();
    await t?.close();
  });

  for (const [label, storage] of [['without a storage', undefined], ['with a storage', new MapStorage()]] as const) {
    it(`stays logged in on the server after a reconnect to a new session, ${label}`, async () => {
      const client = new DDPClient(t.url);
      clients.push(client);
      const login = new AccountsClient(client, storage);
      const id = await login.createUser({ username: `new-session-${label.replaceAll(' ', '-')}`, password: 'pw' });
      assert.equal(await client.call('whoami'), id);
      const sessions: boolean[] = [];
      client.on('connected', (_session, resumed) => sessions.push(resumed));
      client.disconnect(); // the server ends the session, and its login with it
      await client.connect();
      assert.deepEqual(sessions, [false], 'a new session, not a resumed one');
      assert.equal(login.userId(), id, 'the client still says logged in');
      // The resume login is a `wait` call sent first on the new session: this call runs after it.
      assert.equal(await client.call('whoami'), id, 'the server knows the user again');
    });
  }

  it('says loggingIn() while a password login or a sign-up is in flight, as Meteor does, not only while resuming', async () => {
    const client = new DDPClient(t.url);
    clients.push(client);
    const login = new AccountsClient(client);
    const signingUp = login.createUser({ username: 'in-flight', password: 'pw' });
    assert.equal(login.loggingIn(), true, 'during createUser');
    await signingUp;
    assert.equal(login.loggingIn(), false);
    const loggingIn = login.loginWithPassword('in-flight', 'pw');
    assert.equal(login.loggingIn(), true, 'during loginWithPassword');
    await loggingIn;
    assert.equal(login.loggingIn(), false);
    await assert.rejects(login.loginWithPassword('in-flight', 'wrong'));
    assert.equal(login.loggingIn(), false, 'after a refused login');
  });

  it("calls Meteor's trailing callbacks, with the error or undefined, besides settling the promise", async () => {
    // A login form ported from Meteor passes one (loginWithPassword(user, password, (error) => ...)): it was never called.
    const client = new DDPClient(t.url);
    clients.push(client);
    const login = new AccountsClient(client);
    const outcome = (start: (callback: (error?: Error) => void) => Promise<unknown>) =>
      new Promise<string>((resolve) => {
        start((error) => resolve(error ? `error ${String((error as { error?: unknown }).error)}` : 'ok')).catch(() => undefined);
        setTimeout(() => resolve('never called'), 2000);
      });
    assert.equal(await outcome((done) => login.createUser({ username: 'with-callbacks', password: 'pw' }, done)), 'ok');
    assert.equal(await outcome((done) => login.changePassword('wrong', 'pw2', done)), 'error 403');
    assert.equal(await outcome((done) => login.changePassword('pw', 'pw2', done)), 'ok');
    assert.equal(await outcome((done) => login.logoutOtherClients(done)), 'ok');
    assert.equal(await outcome((done) => login.logout(done)), 'ok');
    assert.equal(login.userId(), null);
    assert.equal(await outcome((done) => login.loginWithPassword('with-callbacks', 'pw', done)), 'error 403');
    assert.equal(await outcome((done) => login.loginWithPassword({ username: 'with-callbacks' }, 'pw2', done)), 'ok');
    assert.equal(await outcome((done) => login.forgotPassword({ email: 'nobody@example.com' }, done)), 'error 403');
    assert.equal(await outcome((done) => login.verifyEmail('no-such-token', done)), 'error 403');
  });

  it('says logged out when another client sharing its storage (another tab) logged out', { timeout: 10000 }, async () => {
    const storage = new MapStorage();
    const [first, second] = [new DDPClient(t.url), new DDPClient(t.url)];
    clients.push(first, second);
    const tab = new AccountsClient(first, storage);
    const id = await tab.createUser({ username: 'two-tabs', password: 'pw' });
    const otherTab = new AccountsClient(second, storage);
    const loggedOut = new Promise<void>((resolve) => otherTab.on('logout', resolve));
    await second.connect();
    assert.equal(await second.call('whoami'), id, 'the second tab resumed with the stored token');
    assert.equal(otherTab.userId(), id);
    // The server closes the other tab's connection (its token is gone); it comes back with no token to resume with.
    await tab.logout();
    await loggedOut;
    assert.equal(otherTab.userId(), null);
    assert.equal(await second.call('whoami'), null);
  });

  it("follows the e-mails' links: forgotPassword and resetPassword log in with a new token (the other logins end), verifyEmail", { timeout: 10000 }, async () => {
    const [first, second] = [new DDPClient(t.url), new DDPClient(t.url)];
    clients.push(first, second);
    const device = new AccountsClient(first, new MapStorage());
    const id = await device.createUser({ username: 'forgetful', email: 'forgetful@example.com', password: 'old' });
    const loggedOut = new Promise<void>((resolve) => device.on('logout', resolve));
    const storage = new MapStorage();
    const page = new AccountsClient(second, storage);
    await page.forgotPassword({ email: 'forgetful@example.com' });
    assert.equal(await page.resetPassword(tokenOf('resetPassword'), 'new'), id);
    assert.equal(page.userId(), id);
    await loggedOut; // the login that had the old password ended
    second.disconnect();
    await second.connect();
    assert.equal(await second.call('whoami'), id, 'the new token was stored: a new session resumes with it');
    assert.equal(await page.verifyEmail(tokenOf('verifyEmail')), id);
    assert.deepEqual(page.user()?.emails, [{ address: 'forgetful@example.com', verified: true }]);
    await page.changePassword('new', 'newer');
    assert.equal(await device.loginWithPassword('forgetful', 'newer'), id);
  });
});
