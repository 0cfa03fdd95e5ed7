/**
 * AccountsClient over a real server with accounts: the login survives a
 * reconnect to a new session (the server forgot it; the client logs in again
 * with its token), with a storage and without one; and says logged out when
 * the token it shares with another tab is gone.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AccountsClient, DDPClient, type TokenStorage } from '../src/client/node.js';
import { accounts } from '../src/accounts/index.js';
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

  before(async () => {
    t = await startServer(async (server) => {
      await accounts(server, { mailer: () => undefined }).ready;
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
});
