/**
 * One process per data directory, by a kernel lock that dies with its holder:
 * a second opener is refused (in the same process, in another one, in another
 * pid namespace), and nothing a dead holder leaves behind blocks the next
 * start (a pid now taken by PID 1 or by an unrelated process, a kill -9).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { openEmbeddedStore } from '../src/data/embedded/store.js';
import { StoreInUseError } from '../src/data/embedded/store-errors.js';
import { docsOf, open, tempDir } from './embedded-helpers.js';
import { CLI, exited, startPerseid } from './processes.js';
import { needs } from './skips.js';

const APP = 'dist/examples/tasks/app.js';
const LOCK_HOLDER = new URL('./fixtures/embedded-holder.js', import.meta.url).pathname;

async function refused(dir: string): Promise<string> {
  let message = '';
  await assert.rejects(openEmbeddedStore({ dir }), (error: unknown) => {
    assert.ok(error instanceof StoreInUseError, String(error));
    message = error.message;
    return true;
  });
  return message;
}

/** Runs the holder fixture (opens the store, says so, waits); resolves once it holds the directory. */
function holder(dir: string): Promise<ReturnType<typeof spawn>> {
  const child = spawn(process.execPath, [LOCK_HOLDER, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('holding')) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`the holder exited with ${code}`)));
  });
}

describe('embedded store: the data directory lock', () => {
  it('refuses a second opener in the same process, saying who holds it, and frees the directory on close', async () => {
    const dir = tempDir();
    const store = await open(dir);
    assert.match(await refused(dir), new RegExp(`^the data directory ${dir} is in use by another process \\(pid ${process.pid} on .* since \\d{4}-.*\\): stop it`));
    await store.collection('c').insert({ _id: 'a' });
    await store.close();
    const reopened = await open(dir);
    assert.deepEqual(await docsOf(reopened), [{ _id: 'a' }]);
    assert.match(fs.readFileSync(path.join(dir, 'LOCK'), 'utf8'), new RegExp(`^pid ${process.pid} on `), 'the lock file stays, naming the holder');
  });

  it('opens over a lock file naming PID 1 (a container restarted after a kill) or a live process that is not a store (a reused pid)', async () => {
    const bystander = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    try {
      for (const text of ['1\n', 'pid 1 on a-container since 2020-01-01T00:00:00.000Z\n', `${bystander.pid}\n`]) {
        const dir = tempDir();
        const first = await open(dir);
        await first.collection('c').insert({ _id: 'kept' });
        await first.close();
        fs.writeFileSync(path.join(dir, 'LOCK'), text);
        const store = await open(dir);
        assert.deepEqual(await docsOf(store), [{ _id: 'kept' }], text);
      }
    } finally {
      bystander.kill('SIGKILL');
      await exited(bystander);
    }
  });

  it('refuses while another process holds it, and opens at once after that process is killed with -9', async () => {
    const dir = tempDir();
    const child = await holder(dir);
    assert.match(await refused(dir), new RegExp(`\\(pid ${child.pid} on `));
    child.kill('SIGKILL');
    await exited(child);
    const store = await open(dir);
    assert.deepEqual(await docsOf(store), [{ _id: 'from the holder' }]);
  });

  const unshare = spawnSync('unshare', ['--pid', '--fork', '--kill-child', 'true']);
  const canUnshare = process.getuid?.() === 0 && unshare.status === 0;

  it('refuses a second server in another pid namespace with one line, though both are PID 1', { skip: canUnshare ? false : needs('root and unshare (util-linux)', 'run the tests as root, with apt-get install util-linux') }, async () => {
    const dir = tempDir();
    const inNamespace = ['--pid', '--fork', '--kill-child', process.execPath, CLI, 'start', APP, '--data-dir', dir, '--port', '0'];
    const first = spawn('unshare', inNamespace, { stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      let out = '';
      first.stdout!.on('data', (c: Buffer) => (out += c.toString()));
      first.stderr!.on('data', (c: Buffer) => (out += c.toString()));
      const deadline = Date.now() + 20000;
      while (!/Perseid is running/.test(out)) {
        assert.ok(Date.now() < deadline && first.exitCode === null, `the first server did not start: ${out}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      const second = spawnSync('unshare', inNamespace, { encoding: 'utf8', timeout: 20000 });
      assert.equal(second.status, 1, second.stderr);
      assert.equal(second.stderr.trim().split('\n').length, 1, second.stderr);
      assert.match(second.stderr, new RegExp(`^perseid start: the data directory ${dir} is in use by another process \\(pid 1 on .*\\): stop it`));
    } finally {
      first.kill('SIGKILL');
      await exited(first);
    }
    // Killing unshare kills its namespace; the kernel dropped the lock with it.
    const after = await startPerseid(APP, ['--data-dir', dir, '--port', '0']);
    assert.equal(await after.stop(), 0);
  });
});
