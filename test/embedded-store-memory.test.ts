/**
 * The embedded store keeps every document in memory: a process whose heap the
 * store fills past half warns, on opening, that it will stop with an
 * out-of-memory error past the limit, and what to do.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { open, tempDir } from './embedded-helpers.js';

const STORE_MODULE = new URL('../src/data/embedded/store.js', import.meta.url).href;

/** Opens `dir` in a child process whose heap limit is about `heapMiB` (a small young generation), and returns what it logged. */
function openWithHeap(dir: string, heapMiB: number): string {
  const script = `const { openEmbeddedStore } = await import(${JSON.stringify(STORE_MODULE)}); await (await openEmbeddedStore({ dir: ${JSON.stringify(dir)} })).close();`;
  const child = spawnSync(process.execPath, [`--max-old-space-size=${heapMiB}`, '--max-semi-space-size=1', '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20000 });
  assert.equal(child.status, 0, child.stderr);
  return child.stderr + child.stdout;
}

describe('embedded store: memory', () => {
  it('warns on opening when the store fills more than half of the heap, saying what to do', async () => {
    const dir = tempDir();
    const store = await open(dir);
    const c = store.collection('c');
    const pad = 'm'.repeat(400);
    for (let i = 0; i < 40_000; i += 1000) {
      await Promise.all(Array.from({ length: 1000 }, (_, j) => c.insert({ _id: `d${i + j}`, pad })));
    }
    await store.close();

    const tight = openWithHeap(dir, 40); // the store takes about 28 MiB of it
    assert.match(tight, /WARN .*more than half of the heap is in use.*--max-old-space-size.*MONGO_URL/);
    assert.match(tight, /documents=40000/);
    assert.doesNotMatch(openWithHeap(dir, 1024), /WARN/, 'no warning while the store takes little of the heap');
  });
});
