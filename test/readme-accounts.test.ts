/**
 * The README's Accounts sample: the block must be docs/samples/readme/accounts.ts
 * verbatim, and that file runs: sign-up through AccountsClient, a per-user
 * publication, check(), the rate limit, and a resume after a reconnect.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { setup } from '../docs/samples/readme/accounts.js';
import { AccountsClient, DDPClient, type TokenStorage } from '../src/client/node.js';
import { startServer, type TestServer } from './helpers.js';
import { eventually } from './processes.js';

const root = new URL('../../', import.meta.url);

class MemoryStorage implements TokenStorage {
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

describe("the README's Accounts sample", () => {
  let t: TestServer;
  before(async () => {
    t = await startServer((server) => {
      setup(server);
      server.methods({
        dropMyConnection(this: { connection: { close(): void } }) {
          setTimeout(() => this.connection.close(), 10);
        },
      });
    });
  });
  after(() => t.close());

  it('is in the README verbatim', () => {
    const readme = readFileSync(new URL('README.md', root), 'utf8');
    const sample = readFileSync(new URL('docs/samples/readme/accounts.ts', root), 'utf8');
    assert.ok(readme.includes(`\`\`\`ts\n${sample}\`\`\``), 'README.md does not show docs/samples/readme/accounts.ts as it is');
  });

  it('signs up, publishes to the user alone, checks arguments, limits the rate, and resumes after a reconnect', async () => {
    const client = new DDPClient(t.url, { backoff: { minTimeout: 50, maxTimeout: 200 } });
    const storage = new MemoryStorage();
    const accounts = new AccountsClient(client, storage);
    try {
      await assert.rejects(client.call('addNote', 'anonymous'), { error: 401 });
      await assert.rejects(accounts.createUser({ username: 'al', password: 'pw' }), { error: 403, reason: 'User validation failed' });
      const userId = await accounts.createUser({ username: 'ada', password: 'correct horse' });
      assert.equal(accounts.userId(), userId);
      assert.ok(storage.items.get('perseid.loginToken'));
      const notes = client.collection('notes');
      await client.subscribe('myNotes').ready;
      await client.call('addNote', 'hello');
      assert.deepEqual(notes.find().map((n) => n.text), ['hello']);
      await assert.rejects(client.call('addNote', { $ne: 1 }), { error: 400, reason: 'Match failed' });
      const outcomes = await Promise.allSettled(Array.from({ length: 6 }, (_v, i) => client.call('addNote', `n${i}`)));
      assert.ok(outcomes.some((o) => o.status === 'rejected' && (o.reason as { error?: unknown }).error === 'too-many-requests'));

      // The server drops the connection: the client resumes with its token before resubscribing.
      const sessionBefore = client.sessionId;
      await client.call('dropMyConnection');
      await eventually(() => client.status === 'connected' && client.sessionId !== sessionBefore, 'the reconnect');
      assert.equal(accounts.userId(), userId);
      await eventually(() => notes.find().some((n) => n.text === 'hello'), "the user's notes after the resume");
      await accounts.logout();
      await eventually(() => notes.find().length === 0, 'the notes gone after logout');
      assert.equal(storage.items.size, 0);
    } finally {
      client.disconnect();
    }
  });
});
