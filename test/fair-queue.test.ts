/** FairQueue: one task at a time, in turns between keys, each key's tasks in order; a failing task fails only its caller. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FairQueue } from '../src/fair-queue.js';

describe('FairQueue', () => {
  it('runs one task at a time, taking turns between keys, each key in order', async () => {
    const queue = new FairQueue();
    const ran: string[] = [];
    let running = 0;
    const task = (name: string) => async () => {
      assert.equal(++running, 1, 'one at a time');
      await new Promise((r) => setTimeout(r, 1));
      ran.push(name);
      running--;
      return name;
    };
    // `x` runs while the others queue up: then every key waits, in the order it came.
    const results = await Promise.all([
      queue.run('x', task('x')),
      ...['a1', 'a2', 'a3', 'a4'].map((n) => queue.run('a', task(n))),
      ...['b1', 'b2'].map((n) => queue.run('b', task(n))),
      queue.run('c', task('c1')),
    ]);
    assert.deepEqual(results, ['x', 'a1', 'a2', 'a3', 'a4', 'b1', 'b2', 'c1']);
    assert.deepEqual(ran, ['x', 'a1', 'b1', 'c1', 'a2', 'b2', 'a3', 'a4']);
  });

  it('fails only the caller of a task that throws, at once or later, and goes on', async () => {
    const queue = new FairQueue();
    const thrown = queue.run('a', () => {
      throw new Error('at once');
    });
    const rejected = queue.run('a', () => Promise.reject(new Error('later')));
    const after = queue.run('a', async () => 'after');
    await assert.rejects(thrown, /at once/);
    await assert.rejects(rejected, /later/);
    assert.equal(await after, 'after');
  });
});
