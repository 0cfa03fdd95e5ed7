/**
 * Client collections as a page queries them: Mongo selectors, sort, skip,
 * limit and projections with the server's answers (checked against the
 * server's own collection over the same documents), `findOne`, predicates,
 * and `observeChanges` / `observe` / `watch` on local queries.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DDPClient, type Document, type FindOptions, type LocalCursor, type LocalSelector } from '../src/client/node.js';
import { LocalStore } from '../src/client/store.js';
import { mingoProject, mingoQuery, mingoUpdate } from '../src/query/mingo.js';
import * as browserMingo from '../src/query/mingo-browser.js';
import { startServer, type TestServer } from './helpers.js';

type Doc = { _id: string; name: string; age?: number; tags?: string[]; address?: { city: string; zip?: string }; at?: Date };

const PEOPLE: Doc[] = [
  { _id: 'a', name: 'Ada', age: 36, tags: ['math', 'code'], address: { city: 'London', zip: 'N1' }, at: new Date(5) },
  { _id: 'b', name: 'Bob', age: 25, tags: ['code'], address: { city: 'Paris' }, at: new Date(3) },
  { _id: 'c', name: 'Cy', tags: [], address: { city: 'London' }, at: new Date(9) },
  { _id: 'd', name: 'Dee', age: 25, tags: ['art', 'math'], at: new Date(1) },
  { _id: 'e', name: 'eve', age: 51, address: { city: 'Oslo', zip: 'X' }, at: new Date(7) },
];

function storeWith(docs: readonly Doc[]): LocalStore {
  const store = new LocalStore();
  for (const { _id, ...fields } of docs) store.apply({ msg: 'added', collection: 'people', id: _id, fields });
  return store;
}

const QUERIES: Array<[selector: LocalSelector<Doc> & object, options: FindOptions]> = [
  [{}, { sort: { name: 1 } }],
  [{ age: 25 }, { sort: { name: -1 } }],
  [{ age: { $gte: 26 } }, { sort: { age: 1 } }],
  [{ age: { $exists: false } }, {}],
  [{ tags: 'math' }, { sort: { name: 1 } }],
  [{ tags: { $size: 0 } }, {}],
  [{ tags: { $all: ['art', 'math'] } }, {}],
  [{ 'address.city': 'London' }, { sort: { at: -1 } }],
  [{ 'address.zip': { $in: ['N1', 'X'] } }, { sort: { name: 1 }, fields: { name: 1 } }],
  [{ $or: [{ age: { $lt: 26 } }, { name: /^e/ }] }, { sort: { age: -1, name: 1 } }],
  [{ name: { $regex: 'e$', $options: 'i' } }, { sort: { name: 1 } }],
  [{ age: { $not: { $gt: 30 } } }, { sort: { name: 1 } }],
  [{}, { sort: { age: 1, name: 1 }, skip: 1, limit: 2 }],
  [{}, { sort: [['address.city', 'asc'], ['name', 'desc']], projection: { address: 0, tags: 0 } }],
  [{ tags: { $elemMatch: { $eq: 'code' } } }, { sort: { name: 1 }, fields: { 'address.city': 1 } }],
  [{ tags: { $type: 'string' } }, { sort: { name: 1 } }],
];

describe('client collections: queries', () => {
  const people = storeWith(PEOPLE).collection('people');

  it('answers Mongo selectors with sort, skip, limit and projections', () => {
    assert.deepEqual(people.find({ age: 25 }, { sort: { name: 1 } }).map((p) => p.name), ['Bob', 'Dee']);
    assert.deepEqual(people.find({ 'address.city': 'London' }, { sort: { at: -1 } }).map((p) => p._id), ['c', 'a']);
    assert.deepEqual(people.find({}, { sort: { age: -1 }, skip: 1, limit: 2 }).map((p) => p._id), ['a', 'b']);
    assert.deepEqual(people.find({ tags: 'math' }, { fields: { name: 1 } }), [{ _id: 'a', name: 'Ada' }, { _id: 'd', name: 'Dee' }]);
    assert.deepEqual(people.find('e', { fields: { address: 0, tags: 0, at: 0 } }), [{ _id: 'e', name: 'eve', age: 51 }]);
  });

  it('keeps arrival order without a sort, and takes predicates and ids', () => {
    assert.deepEqual(people.find().map((p) => p._id), ['a', 'b', 'c', 'd', 'e']);
    assert.deepEqual(people.find((p) => (p as Doc).age === 25).map((p) => p._id), ['b', 'd']);
    assert.equal((people.findOne('c') as Doc).name, 'Cy');
    assert.equal((people.findOne({ age: { $gt: 40 } }) as Doc).name, 'eve');
    assert.equal((people.findOne({}, { sort: { at: 1 } }) as Doc)._id, 'd');
    assert.equal(people.findOne({ name: 'nobody' }), undefined);
    assert.equal(people.cursor({ age: 25 }).count(), 2);
  });

  it("selects nothing with a missing selector, as Meteor does, and everything with none", () => {
    const missing = undefined as string | undefined; // say, an id not chosen yet
    assert.equal(people.findOne(missing), undefined);
    assert.deepEqual(people.find(null), []);
    assert.deepEqual(people.cursor(missing, { sort: { name: 1 } }).fetch(), []);
    assert.equal(people.find().length, PEOPLE.length);
    assert.equal(people.cursor().count(), PEOPLE.length);
  });

  it('refuses bad queries with the reason', () => {
    assert.throws(() => people.find({ age: { $bogus: 1 } }), /Invalid selector.*\$bogus/);
    assert.throws(() => people.find({}, { sort: { age: 2 as 1 } }), /Invalid sort direction/);
    assert.throws(() => people.find({}, { fields: { name: 1, age: 0 } }), /cannot mix/);
    assert.throws(() => people.find({}, { limit: -1 }), /limit must be a non-negative integer/);
  });
});

describe("client collections: the server's semantics", () => {
  let t: TestServer;
  let client: DDPClient;
  before(async () => {
    t = await startServer(async (server, { collection }) => {
      const people = collection<Doc>('people');
      for (const doc of PEOPLE) await people.insertAsync(doc);
      server.publish('people', () => people.find());
    });
    client = new DDPClient(t.url);
    await client.subscribe('people').ready;
  });
  after(async () => {
    client?.disconnect();
    await t?.close();
  });

  it('gives the same documents, in the same order, as the server for the same query', async () => {
    const onServer = t.collection<Doc>('people');
    for (const [selector, options] of QUERIES) {
      const local = client.collection<Doc>('people').find(selector, options);
      const remote = await onServer.find(selector as Record<string, unknown>, options).fetchAsync();
      const sorted = options.sort !== undefined;
      const normal = (docs: unknown[]) => (sorted ? docs : [...docs].sort((x, y) => String((x as Doc)._id).localeCompare(String((y as Doc)._id))));
      assert.deepEqual(normal(local), normal(remote), `${JSON.stringify(selector)} ${JSON.stringify(options)}`);
    }
  });
  it("answers Meteor 3's async reads (findOneAsync, fetchAsync, countAsync, forEach, map and their async forms) as the server's cursors do", async () => {
    const local = client.collection<Doc>('people');
    const remote = t.collection<Doc>('people');
    const selector = { age: { $gte: 25 } };
    const options = { sort: { name: -1 as const } };
    assert.deepEqual(await local.findOneAsync(selector, options), await remote.findOneAsync(selector, options));
    assert.equal(await local.findOneAsync({ name: 'nobody' }), undefined);
    const [here, there] = [local.cursor(selector, options), remote.find(selector, options)];
    assert.deepEqual(await here.fetchAsync(), await there.fetchAsync());
    assert.equal(await here.countAsync(), await there.countAsync());
    const names = (doc: Doc, index: number) => `${index}:${doc.name}`;
    assert.deepEqual(await here.mapAsync(names), await there.mapAsync(names));
    assert.deepEqual(here.map(names), ['0:eve', '1:Dee', '2:Bob', '3:Ada']);
    const seen: string[] = [];
    here.forEach((doc, index) => seen.push(names(doc, index)));
    await here.forEachAsync(async (doc) => void seen.push(doc._id));
    assert.deepEqual(seen, ['0:eve', '1:Dee', '2:Bob', '3:Ada', 'e', 'd', 'b', 'a']);
  });
});

describe("client collections: mingo's browser build", () => {
  it('selects, projects and updates exactly as the full build', () => {
    for (const [selector] of QUERIES) {
      const full = mingoQuery(selector as Document);
      const lean = browserMingo.mingoQuery(selector as Document);
      for (const doc of PEOPLE) assert.equal(lean.test(doc), full.test(doc), `${JSON.stringify(selector)} on ${doc._id}`);
    }
    const projection = { tags: { $slice: 1 }, name: 1 };
    for (const doc of PEOPLE) assert.deepEqual(browserMingo.mingoProject(doc, projection), mingoProject(doc, projection));
    const ops = { $inc: { age: 1 }, $push: { tags: { $each: ['x'], $sort: 1 } }, $set: { 'address.city': 'Rome' } };
    for (const doc of PEOPLE) {
      const [a, b] = [structuredClone(doc), structuredClone(doc)];
      assert.deepEqual(browserMingo.mingoUpdate(a, ops), mingoUpdate(b, ops));
      assert.deepEqual(a, b);
    }
  });

  it('leaves $expr to the server', () => {
    assert.equal(mingoQuery({ $expr: { $gt: ['$age', 30] } }).test(PEOPLE[0]!), true);
    assert.throws(() => browserMingo.mingoQuery({ $expr: { $gt: ['$age', 30] } }).test(PEOPLE[0]!), /\$gt/);
  });
});

describe('client collections: observing local queries', () => {
  it("reports a sorted, limited query's changes with Meteor's ordered callbacks", () => {
    const store = storeWith(PEOPLE);
    const people = store.collection('people');
    const calls: unknown[] = [];
    const handle = people.cursor({ age: { $exists: true } }, { sort: { age: 1, name: 1 }, limit: 3, fields: { name: 1, age: 1 } }).observeChanges({
      addedBefore: (id, fields, before) => calls.push(['addedBefore', id, fields, before]),
      changed: (id, fields) => calls.push(['changed', id, fields]),
      movedBefore: (id, before) => calls.push(['movedBefore', id, before]),
      removed: (id) => calls.push(['removed', id]),
    });
    // The initial results, in order.
    assert.deepEqual(calls.splice(0), [
      ['addedBefore', 'b', { name: 'Bob', age: 25 }, null],
      ['addedBefore', 'd', { name: 'Dee', age: 25 }, null],
      ['addedBefore', 'a', { name: 'Ada', age: 36 }, null],
    ]);
    store.apply({ msg: 'changed', collection: 'people', id: 'e', fields: { age: 20 } }); // enters first, pushes Ada out
    assert.deepEqual(calls.splice(0), [
      ['removed', 'a'],
      ['addedBefore', 'e', { name: 'eve', age: 20 }, 'b'],
    ]);
    store.apply({ msg: 'changed', collection: 'people', id: 'b', fields: { age: 26 } }); // moves after Dee
    assert.deepEqual(calls.splice(0), [
      ['changed', 'b', { age: 26 }],
      ['movedBefore', 'b', null],
    ]);
    store.apply({ msg: 'changed', collection: 'people', id: 'c', fields: { tags: ['x'] } }); // not selected: nothing
    store.apply({ msg: 'changed', collection: 'people', id: 'a', fields: { tags: ['y'] } }); // selected but outside the limit
    store.apply({ msg: 'changed', collection: 'people', id: 'd', fields: { tags: ['z'] } }); // in the results, projected away
    assert.deepEqual(calls, []);
    handle.stop();
    store.apply({ msg: 'removed', collection: 'people', id: 'e' });
    assert.deepEqual(calls, []);
  });

  it('gives observe() documents and indexes, and unordered callbacks', () => {
    const store = storeWith(PEOPLE.slice(0, 3));
    const people = store.collection('people');
    const calls: unknown[] = [];
    people.cursor({}, { sort: { name: 1 } }).observe({
      addedAt: (doc, at, before) => calls.push(['addedAt', doc._id, at, before]),
      changedAt: (doc, old, at) => calls.push(['changedAt', doc._id, old.name, doc.name, at]),
      removedAt: (doc, at) => calls.push(['removedAt', doc._id, at]),
      movedTo: (doc, from, to, before) => calls.push(['movedTo', doc._id, from, to, before]),
    });
    const unordered: unknown[] = [];
    people.cursor({ name: { $gt: 'B' } }).observe({
      added: (doc) => unordered.push(['added', doc._id]),
      changed: (doc, old) => unordered.push(['changed', doc._id, old.name]),
      removed: (doc) => unordered.push(['removed', doc._id]),
    });
    assert.deepEqual(calls.splice(0), [
      ['addedAt', 'a', 0, null],
      ['addedAt', 'b', 1, null],
      ['addedAt', 'c', 2, null],
    ]);
    store.apply({ msg: 'changed', collection: 'people', id: 'a', fields: { name: 'Zed' } });
    assert.deepEqual(calls.splice(0), [
      ['changedAt', 'a', 'Ada', 'Zed', 0],
      ['movedTo', 'a', 0, 2, null],
    ]);
    store.apply({ msg: 'removed', collection: 'people', id: 'b' });
    assert.deepEqual(calls.splice(0), [['removedAt', 'b', 0]]);
    assert.deepEqual(unordered, [['added', 'b'], ['added', 'c'], ['added', 'a'], ['removed', 'b']]);
  });

  it('gives the callbacks the ids of results whose projection leaves _id out', () => {
    const store = storeWith(PEOPLE.slice(0, 3));
    const people = store.collection('people');
    const calls: unknown[] = [];
    const query = people.cursor({}, { sort: { name: 1 }, fields: { _id: 0, name: 1 } });
    const changes = query.observeChanges({
      addedBefore: (id, fields, before) => calls.push(['addedBefore', id, fields, before]),
      changed: (id, fields) => calls.push(['changed', id, fields]),
      movedBefore: (id, before) => calls.push(['movedBefore', id, before]),
      removed: (id) => calls.push(['removed', id]),
    });
    const docs = query.observe({ movedTo: (doc, from, to, before) => calls.push(['movedTo', doc, from, to, before]) });
    assert.deepEqual(calls.splice(0), [
      ['addedBefore', 'a', { name: 'Ada' }, null],
      ['addedBefore', 'b', { name: 'Bob' }, null],
      ['addedBefore', 'c', { name: 'Cy' }, null],
    ]);
    store.apply({ msg: 'changed', collection: 'people', id: 'a', fields: { name: 'Bz' } });
    store.apply({ msg: 'removed', collection: 'people', id: 'c' });
    assert.deepEqual(calls, [
      ['changed', 'a', { name: 'Bz' }],
      ['movedBefore', 'a', 'c'],
      ['movedTo', { name: 'Bz' }, 0, 1, 'c'],
      ['removed', 'c'],
    ]);
    changes.stop();
    docs.stop();
  });

  it('keeps the result list and its documents the same objects until they change', () => {
    const store = storeWith(PEOPLE);
    const people = store.collection('people');
    const seen: Array<readonly unknown[]> = [];
    const watch = people.cursor({ age: 25 }, { sort: { name: 1 } }).watch((results) => seen.push(results));
    const first = watch.results;
    assert.deepEqual(first.map((p) => (p as Doc).name), ['Bob', 'Dee']);
    store.apply({ msg: 'changed', collection: 'people', id: 'a', fields: { name: 'Ada L.' } }); // not selected
    store.apply({ msg: 'changed', collection: 'people', id: 'b', fields: { age: 25 } }); // no actual change
    assert.equal(watch.results, first);
    assert.equal(seen.length, 0);
    store.apply({ msg: 'changed', collection: 'people', id: 'd', fields: { name: 'Di' } });
    assert.equal(seen.length, 1);
    assert.notEqual(watch.results, first);
    assert.equal(watch.results[0], first[0], "Bob's document did not change: the same object");
    watch.stop();
    store.apply({ msg: 'removed', collection: 'people', id: 'b' });
    assert.equal(seen.length, 1);
  });

  it('keeps a projected result the same object when only fields outside the projection change', () => {
    const store = storeWith(PEOPLE);
    const people = store.collection('people');
    const watch = people.cursor({ age: 25 }, { sort: { name: 1 }, fields: { name: 1 } }).watch(() => undefined);
    const [bob] = watch.results;
    store.apply({ msg: 'changed', collection: 'people', id: 'b', fields: { tags: ['new'] } }); // projected away
    store.apply({ msg: 'changed', collection: 'people', id: 'd', fields: { name: 'Di' } });
    assert.deepEqual(watch.results.map((p) => (p as Doc).name), ['Bob', 'Di']);
    assert.equal(watch.results[0], bob, "Bob's result did not change: the same object");
    watch.stop();
  });

  it('follows a long result list at a small multiple of the cost of re-running its query', () => {
    // A component's query mounted while its subscription loads: every `added` refreshes the results.
    const count = 3000;
    const load = (follow: (cursor: LocalCursor<Document>) => { each(): void; stop(): void }) => {
      const store = new LocalStore();
      const follower = follow(store.collection('people').cursor({}, { sort: { n: -1 } }));
      const started = performance.now();
      for (let i = 0; i < count; i++) {
        store.apply({ msg: 'added', collection: 'people', id: `p${i}`, fields: { n: i } });
        follower.each();
      }
      const took = performance.now() - started;
      follower.stop();
      return took;
    };
    const requery = load((cursor) => ({ each: () => void cursor.fetch(), stop: () => undefined }));
    let added = 0;
    const observed = load((cursor) => ({ each: () => undefined, ...cursor.observeChanges({ addedBefore: () => added++ }) }));
    assert.equal(added, count);
    // Measured against the same machine's query time: linear per change, not quadratic in the results.
    assert.ok(observed < 8 * requery, `observing took ${Math.round(observed)} ms, re-running the query ${Math.round(requery)} ms`);
  });

  it('refreshes an observer once for a batch of changes', () => {
    const store = storeWith(PEOPLE);
    const seen: unknown[] = [];
    store.collection('people').cursor({}, { sort: { name: 1 } }).watch((results) => seen.push(results.length));
    store.reset([{ msg: 'added', collection: 'people', id: 'x', fields: { name: 'X' } }]);
    assert.deepEqual(seen, [1]);
  });
});
