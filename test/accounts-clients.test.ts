/**
 * Logins from DDP clients we did not write: simpleddp with
 * simpleddp-plugin-login (npm), and python-meteor (PyPI) in a real Python
 * process. Each logs in with a password, resumes with its token after the
 * server drops its connection, and logs out; logoutOtherClients closes the
 * other client's connection and its resume is refused.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import SimpleDDP from 'simpleddp';
import { simpleDDPLogin } from 'simpleddp-plugin-login';
import WebSocket from 'ws';
import { accountsServer, digest, type AccountsServer } from './accounts-helpers.js';
import { embeddedTarget } from './databases.js';
import { eventually } from './processes.js';
import { needs } from './skips.js';

type Opened = Awaited<ReturnType<ReturnType<typeof embeddedTarget>['open']>>;

describe('accounts with clients we did not write', () => {
  let opened: Opened;
  let t: AccountsServer;
  before(async () => {
    opened = await embeddedTarget().open();
    t = await accountsServer(opened.database, { defaultRateLimit: false }, (server) => {
      server.methods({
        dropMyConnection(this: { connection: { close(): void } }) {
          setTimeout(() => this.connection.close(), 10);
        },
      });
    });
    for (const name of ['ann', 'bob', 'py']) await t.accounts.createUser({ username: name, password: `${name}-pw` });
  });
  after(async () => {
    await t.close();
    await opened.cleanup();
  });

  it('simpleddp-plugin-login: password login, resume after a reconnect, logout', async () => {
    const ddp = new SimpleDDP({ endpoint: t.wsUrl, SocketConstructor: WebSocket, reconnectInterval: 100 }, [simpleDDPLogin]);
    try {
      await ddp.connect();
      const events: string[] = [];
      for (const event of ['login', 'loginResume', 'logout', 'loginResumeFailed']) ddp.on(event, () => void events.push(event));
      const reply = await ddp.login({ user: { username: 'ann' }, password: digest('ann-pw') });
      assert.equal(await ddp.call('whoami'), reply.id);
      await ddp.call('dropMyConnection');
      await eventually(() => events.includes('loginResume'), 'the resume after reconnecting');
      assert.equal(await ddp.call('whoami'), reply.id);
      await ddp.logout();
      assert.equal(await ddp.call('whoami'), null);
      assert.deepEqual(events, ['login', 'loginResume', 'logout']);
    } finally {
      await ddp.disconnect();
    }
  });

  it("simpleddp-plugin-login: logoutOtherClients closes the other client's connection and its resume fails", async () => {
    const first = new SimpleDDP({ endpoint: t.wsUrl, SocketConstructor: WebSocket, reconnectInterval: 100 }, [simpleDDPLogin]);
    const second = new SimpleDDP({ endpoint: t.wsUrl, SocketConstructor: WebSocket, reconnectInterval: 100 }, [simpleDDPLogin]);
    try {
      await first.connect();
      await second.connect();
      await first.login({ user: { username: 'bob' }, password: 'bob-pw' });
      await second.login({ user: { username: 'bob' }, password: digest('bob-pw') });
      let failed: unknown;
      second.on('loginResumeFailed', (m) => void (failed = m));
      // What Meteor's Meteor.logoutOtherClients() sends.
      await first.call('getNewToken');
      await first.call('removeOtherTokens');
      await eventually(() => failed !== undefined, "the other client's failed resume");
      assert.equal((failed as { reason?: string }).reason, "You've been logged out by the server. Please log in again.");
      assert.equal(await second.call('whoami'), null);
      assert.ok(await first.call('whoami'));
    } finally {
      await first.disconnect();
      await second.disconnect();
    }
  });

  const python = process.env.PERSEID_PYTHON ?? ['.cache/python/bin/python', '../.cache/python/bin/python'].find((p) => existsSync(p));
  const hasMeteorClient = python !== undefined && spawnSync(python, ['-c', 'import MeteorClient']).status === 0;
  const skip = hasMeteorClient ? false : needs('python-meteor (PyPI)', 'python3 -m venv .cache/python && .cache/python/bin/pip install python-meteor (.ci/run does it)');
  it('python-meteor (PyPI): password login, resume after a reconnect, logout', { skip }, async () => {
    const script = new URL('../../test/fixtures/python_meteor_client.py', import.meta.url).pathname;
    const child = spawn(python!, [script, t.wsUrl, 'py', 'py-pw'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => child.kill('SIGKILL'), 60000);
      child.on('exit', (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    const steps = out.trim().split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);
    assert.equal(code, 0, `python exited ${code}: ${out}\n${err.slice(-2000)}`);
    const py = (await t.accounts.findUserByUsername('py'))!;
    assert.deepEqual(steps, [
      { step: 'login', error: null, id: py._id, type: 'password' },
      { step: 'whoami', result: py._id },
      { step: 'resumed', whoami: py._id },
      { step: 'logout', whoami: null },
    ]);
  });
});
