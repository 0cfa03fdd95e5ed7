/**
 * What every watched-collections implementation owes (fanout/watched-collections.ts),
 * written once and run against each (test/watched-collections.test.ts).
 */
import assert from 'node:assert/strict';
import { backendTest } from './backend-test.js';
import type { WatchedCollections } from '../../src/fanout/watched-collections.js';

/** Makes a set with the given time to live; sets made by one factory are separate. */
export type MakeWatched = (ttlMs: number) => WatchedCollections;

export function watchedCollectionsSuite(make: () => Promise<{ make: MakeWatched; close(): Promise<void> }>): void {
  const run = backendTest(make, (backend) => backend.make);

  run('lists what any server announced, each name once', async (make) => {
    const watched = make(10000);
    assert.deepEqual(await watched.list(), []);
    await watched.announce(['tasks', 'lists']);
    await watched.announce(['tasks']);
    await watched.announce([]);
    assert.deepEqual((await watched.list()).sort(), ['lists', 'tasks']);
  });

  run('forgets a collection nobody announced within the time to live', async (make) => {
    const watched = make(200);
    await watched.announce(['old']);
    await new Promise((r) => setTimeout(r, 300));
    await watched.announce(['fresh']);
    assert.deepEqual(await watched.list(), ['fresh']);
  });
}
