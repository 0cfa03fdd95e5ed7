/**
 * Seeded ids against vectors produced by Meteor's own code: latency
 * compensation depends on a client stub and the server drawing the same ids
 * from a method's `randomSeed`. test/fixtures/meteor-random-vectors.json was
 * made once by running Meteor's `random` and `ddp-common` packages (only the
 * values are kept here, none of their code).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { collectionIdSequence, makeRpcSeed, RandomStream } from '../src/ddp/random.js';

interface Vectors {
  vectors: Array<{ seed: string; collection?: string; ids?: string[]; objectIds?: string[]; rpc?: string; seeds?: string[] }>;
  interleaved: Array<[string, string]>;
}

const { vectors, interleaved } = JSON.parse(readFileSync(new URL('../../test/fixtures/meteor-random-vectors.json', import.meta.url), 'utf8')) as Vectors;

describe('seeded random streams, against Meteor\'s own output', () => {
  it('draws the ids Meteor draws for /collection/<name> from each seed, strings and ObjectIDs', () => {
    const withIds = vectors.filter((v) => v.collection);
    assert.ok(withIds.length >= 20);
    for (const { seed, collection, ids, objectIds } of withIds) {
      const strings = collectionIdSequence(new RandomStream(seed), collection!);
      assert.deepEqual([0, 1, 2].map(() => strings.id()), ids, `${seed} ${collection}`);
      const hex = collectionIdSequence(new RandomStream(seed), collection!);
      assert.deepEqual([0, 1].map(() => hex.hexString(24)), objectIds, `${seed} ${collection} ObjectIDs`);
    }
  });

  it('makes the seeds Meteor makes for calls nested in a method', () => {
    const rpcs = vectors.filter((v) => v.rpc);
    assert.ok(rpcs.length >= 5);
    for (const { seed, rpc, seeds } of rpcs) {
      const enclosing = new RandomStream(seed);
      assert.deepEqual([makeRpcSeed(enclosing, rpc!), makeRpcSeed(enclosing, rpc!)], seeds, seed);
    }
  });

  it('keeps the streams of one invocation independent when their draws interleave', () => {
    const stream = new RandomStream(vectors[0]!.seed);
    assert.deepEqual(
      interleaved.map(([collection]) => [collection, collectionIdSequence(stream, collection).id()]),
      interleaved,
    );
  });
});
