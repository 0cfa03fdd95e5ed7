/**
 * The embedded store on a disk that fills up, for real (a small tmpfs): a
 * write the log cannot take is reported failed, was never visible, and never
 * comes back (not after a restart either); the store says it cannot write;
 * writes resume by themselves once space returns. And a data directory removed
 * under a running store: writes are refused, not acknowledged into a deleted file.
 * And a process file size limit (`ulimit -f`) the log reaches: refused until it fits.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { DatabaseUnavailableError } from '../src/data/driver.js';
import { listDataFiles } from '../src/data/embedded/files.js';
import { docsOf, logLines, open, tempDir } from './embedded-helpers.js';
import { eventually } from './processes.js';
import { smallDisk, smallDiskSkip } from './small-disk.js';

const big = (id: string) => ({ _id: id, pad: 'x'.repeat(16 * 1024) }); // more than the log's last page can still take

describe('embedded store: a full disk', { skip: smallDiskSkip }, () => {
  it('fails the writes the log cannot take, shows and keeps none of them, and resumes once space returns', async () => {
    const disk = smallDisk(2 << 20);
    try {
      const dir = path.join(disk.dir, 'data');
      let store = await open(dir, { retryMs: 50 });
      const c = store.collection('c');
      await c.createIndex({ email: 1 }, { unique: true });
      await c.insert({ _id: 'a', n: 1, email: 'a@x' });
      await c.insert({ _id: 'b', n: 1, email: 'b@x' });
      const log = listDataFiles(dir).logs[0]!.path;
      const logged = fs.readFileSync(log);
      assert.ok(disk.fill() > 0);

      const writes = [
        c.insert(big('x')),
        c.update({ _id: 'a' }, { $set: { n: 2, email: 'b@x-soon' } }, {}),
        c.remove({ _id: 'b' }),
        c.insert({ _id: 'b2', email: 'b@x' }), // takes the key the pending remove frees
      ];
      const seen = await docsOf(store);
      assert.deepEqual(seen.map((d) => [d._id, d.n]), [['a', 1], ['b', 1]], 'nothing pending is visible');
      const outcomes = await Promise.allSettled(writes);
      for (const outcome of outcomes) {
        assert.equal(outcome.status, 'rejected');
        const error = (outcome as PromiseRejectedResult).reason as unknown;
        assert.ok(error instanceof DatabaseUnavailableError, String(error));
        assert.equal(error.error, 503);
        assert.match(error.detail, /ENOSPC/);
      }
      assert.deepEqual(await docsOf(store), [
        { _id: 'a', n: 1, email: 'a@x' },
        { _id: 'b', n: 1, email: 'b@x' },
      ]);
      assert.deepEqual(fs.readFileSync(log), logged, 'the log was cut back to its last good batch');
      assert.match(store.problem() ?? '', /cannot write .*ENOSPC/);
      await assert.rejects(c.insert({ _id: 'y' }), DatabaseUnavailableError, 'refused at once while the disk is full');

      disk.free();
      await eventually(() => store.problem() === undefined, 'writes to resume by themselves');
      await assert.rejects(c.insert({ _id: 'b2', email: 'b@x' }), /E11000/, 'writers are back on the logged state');
      await c.insert(big('x'));
      await c.update({ _id: 'a' }, { $inc: { n: 10 } }, {});
      assert.deepEqual((await docsOf(store)).map((d) => [d._id, d.n]), [['a', 11], ['b', 1], ['x', undefined]]);
      await store.close();

      store = await open(dir);
      assert.deepEqual((await docsOf(store)).map((d) => [d._id, d.n]), [['a', 11], ['b', 1], ['x', undefined]], 'after a restart: no failed write came back');
      await store.close();
    } finally {
      disk.remove();
    }
  });

  it('fails a compaction that does not fit, and keeps every write', async () => {
    const disk = smallDisk(1 << 20);
    try {
      const dir = path.join(disk.dir, 'data');
      let store = await open(dir, { retryMs: 50 });
      const c = store.collection('c');
      for (let i = 0; i < 20; i++) await c.insert({ _id: `d${i}`, pad: 'y'.repeat(8 * 1024) });
      disk.fill();
      await assert.rejects(store.compact(), /ENOSPC/);
      assert.deepEqual(listDataFiles(dir).temporary, [], 'no half snapshot left behind');
      disk.free();
      await c.insert({ _id: 'after' });
      await store.close();
      store = await open(dir);
      assert.equal((await docsOf(store)).length, 21);
      await store.close();
    } finally {
      disk.remove();
    }
  });
});

describe('embedded store: a data directory removed while the server runs', () => {
  it('refuses writes for good, saying why, instead of acknowledging writes that the next start will not have', async () => {
    const dir = path.join(tempDir(), 'data');
    const store = await open(dir, { retryMs: 20 });
    const c = store.collection('c');
    await c.insert({ _id: 'a' });
    fs.rmSync(dir, { recursive: true });

    await assert.rejects(c.insert({ _id: 'b' }), (error: unknown) => error instanceof DatabaseUnavailableError && /was deleted/.test(error.detail));
    assert.deepEqual((await docsOf(store)).map((d) => d._id), ['a'], 'reads go on; the refused write is not shown');
    assert.match(store.problem() ?? '', /cannot write: .*was the data directory removed/, '/health tells, and promises no retry');
    assert.ok(logLines.some((line) => /ERROR .*writes are refused dir=/.test(line)), 'the log promises no retry either');

    // A directory made again at the same place does not hold the log this process writes to.
    fs.mkdirSync(dir);
    await new Promise((resolve) => setTimeout(resolve, 100));
    await assert.rejects(c.insert({ _id: 'c' }), DatabaseUnavailableError);
  });
});

describe('embedded store: a log that reaches the process\'s file size limit (ulimit -f)', () => {
  it('keeps refusing writes, saying why, instead of resuming each time a small scratch file fits', () => {
    const dir = path.join(tempDir(), 'data');
    // The limit applies to the process, so the store runs in one started under it (Node ignores SIGXFSZ: writes get EFBIG).
    const script = `
      import { openEmbeddedStore } from ${JSON.stringify(new URL('../src/data/embedded/store.js', import.meta.url).href)};
      const store = await openEmbeddedStore({ dir: ${JSON.stringify(dir)}, retryMs: 20 });
      const c = store.collection('c');
      let refused;
      for (let i = 0; i < 100 && refused === undefined; i++) await c.insert({ _id: 'd' + i, pad: 'x'.repeat(16 * 1024) }).catch((e) => (refused = e.detail));
      await new Promise((resolve) => setTimeout(resolve, 300));
      const problem = store.problem();
      const again = await c.insert({ _id: 'e', pad: 'x'.repeat(16 * 1024) }).then(() => 'accepted', (e) => e.detail);
      console.log(JSON.stringify({ refused, problem, again }));
      await store.close();`;
    const out = execFileSync('bash', ['-c', 'ulimit -f 256 && exec "$0" --input-type=module -e "$1"', process.execPath, script], { encoding: 'utf8', timeout: 20_000, stdio: ['ignore', 'pipe', 'pipe'] });
    const seen = JSON.parse(out.trim().split('\n').pop()!) as { refused?: string; problem?: string; again: string };
    assert.match(seen.refused ?? 'no write refused', /EFBIG.*file size limit \(ulimit -f\)/);
    assert.match(seen.problem ?? 'writes resumed', /cannot write/, 'still refused after 15 probes');
    assert.match(seen.again, /EFBIG|cannot write/);
  });
});
