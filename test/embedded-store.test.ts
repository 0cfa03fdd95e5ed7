/**
 * The embedded store: documents, indexes, change events, persistence and
 * compaction, against a real data directory. Damage and repair, the lock, a
 * full disk and kill -9 durability have suites of their own
 * (embedded-store-*.test.ts).
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { DuplicateKeyError } from '../src/data/driver.js';
import { listDataFiles, logFileName } from '../src/data/embedded/files.js';
import { openEmbeddedStore, type EmbeddedStore, type EmbeddedStoreOptions } from '../src/data/embedded/store.js';
import type { Document, QuerySpec } from '../src/data/types.js';
import { EJSON } from '../src/ddp/ejson.js';
import { ObjectID } from '../src/ddp/object-id.js';
import { setLogSink } from '../src/log.js';
import type { ChangeEvent, DocumentChange } from '../src/data/change-source.js';

const logLines: string[] = [];
before(() => setLogSink((line) => logLines.push(line)));
after(() => setLogSink((line) => process.stderr.write(line + '\n')));

const dirs: string[] = [];
const stores: EmbeddedStore[] = [];

function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'perseid-embedded-'));
  dirs.push(dir);
  return dir;
}

async function open(dir: string, options: Omit<EmbeddedStoreOptions, 'dir'> = {}): Promise<EmbeddedStore> {
  const store = await openEmbeddedStore({ dir, ...options });
  stores.push(store);
  return store;
}

afterEach(async () => {
  for (const store of stores.splice(0)) await store.close().catch(() => undefined);
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

function q(selector: Document = {}, options: Omit<QuerySpec, 'collection' | 'selector'> = {}): QuerySpec {
  return { collection: 'c', selector, ...options };
}

async function ids(store: EmbeddedStore, spec: QuerySpec = q()): Promise<unknown[]> {
  const { docs } = await store.collection(spec.collection).find(spec);
  return docs.map((doc) => doc._id);
}

async function one(store: EmbeddedStore, id: unknown): Promise<Document | undefined> {
  return (await store.collection('c').find(q({ _id: id }))).docs[0];
}

describe('embedded store: documents', () => {
  it('inserts, finds, updates and removes', async () => {
    const dir = tempDir();
    const store = await open(dir);
    const c = store.collection('c');
    await c.insert({ _id: 'a', n: 1 });
    await c.insert({ _id: 'b', n: 2 });
    assert.deepEqual((await c.find(q())).docs, [
      { _id: 'a', n: 1 },
      { _id: 'b', n: 2 },
    ]);
    const updated = await c.update({ _id: 'a' }, { $set: { n: 10 } }, {});
    assert.equal(updated.numberAffected, 1);
    assert.deepEqual(await one(store, 'a'), { _id: 'a', n: 10 });
    assert.equal((await c.update({ _id: 'zz' }, { $set: { n: 1 } }, {})).numberAffected, 0);
    const removed = await c.remove({ n: { $gt: 5 } });
    assert.equal(removed.removed, 1);
    assert.deepEqual(await ids(store), ['b']);
    assert.equal(await c.count(q()), 1);
    const walBytes = fs.statSync(path.join(dir, logFileName(1))).size;
    assert.ok(walBytes > 0);
    assert.deepEqual(store.stats(), { collections: 1, documents: 1, walBytes, lastSeq: 4, compactions: 0 });
  });

  it('shows a write to readers only once it is in the log, while writers build on it at once', async () => {
    const dir = tempDir();
    const store = await open(dir);
    const c = store.collection('c');
    await c.createIndex({ email: 1 }, { unique: true });
    await c.insert({ _id: 'a', n: 1, email: 'a@x' });
    await c.insert({ _id: 'b', n: 1, email: 'b@x' });
    const log = path.join(dir, logFileName(1));
    const logged = fs.readFileSync(log, 'utf8');
    // Pipelined, unawaited: each write sees the ones before it.
    const writes = [
      c.insert({ _id: 'new', n: 0, email: 'new@x' }),
      c.update({ _id: 'a' }, { $inc: { n: 1 } }, {}),
      c.update({ _id: 'a' }, { $inc: { n: 1 } }, {}),
      c.remove({ _id: 'b' }),
      c.insert({ _id: 'b', n: 5, email: 'b2@x' }),
    ];
    await assert.rejects(c.insert({ _id: 'dup', email: 'new@x' }), DuplicateKeyError, 'a unique key taken by a pending write');
    assert.equal(fs.readFileSync(log, 'utf8'), logged, 'nothing is in the log yet');
    const before = await c.find(q());
    assert.deepEqual(before.docs, [
      { _id: 'a', n: 1, email: 'a@x' },
      { _id: 'b', n: 1, email: 'b@x' },
    ]);
    assert.equal(before.position, 3);
    assert.deepEqual((await c.find(q({ email: 'b@x' }))).docs, [{ _id: 'b', n: 1, email: 'b@x' }], 'an index lookup sees the logged version');
    assert.deepEqual((await c.find(q({ _id: { $in: ['new', 'b'] } }))).docs, [{ _id: 'b', n: 1, email: 'b@x' }]);
    assert.equal(await c.count(q()), 2);
    await Promise.all(writes);
    const after = await c.find(q());
    assert.deepEqual(after.docs, [
      { _id: 'a', n: 3, email: 'a@x' },
      { _id: 'new', n: 0, email: 'new@x' },
      { _id: 'b', n: 5, email: 'b2@x' },
    ]);
    assert.equal(after.position, 8);
  });

  it('rejects duplicate ids and invalid field names', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    await c.insert({ _id: 'a' });
    await assert.rejects(c.insert({ _id: 'a' }), (error: unknown) => {
      assert.ok(error instanceof DuplicateKeyError);
      assert.equal(error.index, '_id_');
      assert.equal(error.code, 11000);
      return true;
    });
    await assert.rejects(c.insert({ _id: 'b', $x: 1 }), /Invalid field name "\$x"/);
    await assert.rejects(c.insert({ _id: 'b', 'x.y': 1 }), /Invalid field name "x.y"/);
    await assert.rejects(c.insert({ x: 1 }), /needs an _id/);
    assert.deepEqual(await ids(store), ['a']);
  });

  it('keeps stored documents apart from the objects callers hold', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    const doc = { _id: 'a', list: [1] };
    await c.insert(doc);
    doc.list.push(2);
    const before = await one(store, 'a');
    assert.deepEqual(before, { _id: 'a', list: [1] });
    await c.update({ _id: 'a' }, { $push: { list: 3 } }, {});
    assert.deepEqual(before, { _id: 'a', list: [1] }, 'an update builds a new document');
    assert.deepEqual(await one(store, 'a'), { _id: 'a', list: [1, 3] });
  });

  it('applies update operators', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    await c.insert({ _id: 'x', n: 1, tags: ['a'], old: 1, gone: true, list: [1, 2, 3, 2] });
    await c.update(
      { _id: 'x' },
      { $set: { 'sub.k': 'v' }, $unset: { gone: '' }, $inc: { n: 2 }, $push: { tags: 'b' }, $rename: { old: 'renamed' } },
      {},
    );
    await c.update({ _id: 'x' }, { $addToSet: { tags: 'a' }, $pull: { list: 2 } }, {});
    await c.update({ _id: 'x' }, { $addToSet: { tags: 'c' } }, {});
    assert.deepEqual(await one(store, 'x'), { _id: 'x', n: 3, tags: ['a', 'b', 'c'], list: [1, 3], sub: { k: 'v' }, renamed: 1 });
  });

  it('reports unknown operators, type errors and changes of _id', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    await c.insert({ _id: 'x', n: 1, tags: [] });
    const cases: Array<[Document, RegExp]> = [
      [{ $foo: { n: 1 } }, /Unknown update operator \$foo/],
      [{ $set: { n: 2 }, other: 1 }, /cannot mix operators and fields/],
      [{ $inc: { tags: 1 } }, /\$inc to field 'tags' of non-numeric type array/],
      [{ $inc: { n: 'one' } }, /\$inc needs a number/],
      [{ $push: { n: 1 } }, /\$push to field 'n' of non-array type number/],
      [{ $set: { 'n.deep': 1 } }, /Cannot create field 'n.deep'/],
      [{ $set: { _id: 'y' } }, /Mod on _id not allowed/],
      [{ $unset: { _id: '' } }, /Mod on _id not allowed/],
      [{ _id: 'y', n: 5 }, /Mod on _id not allowed/],
    ];
    for (const [modifier, error] of cases) await assert.rejects(c.update({ _id: 'x' }, modifier, {}), error);
    await assert.rejects(c.update({}, { n: 1 }, { multi: true }), /multi update only works with \$ operators/);
    assert.deepEqual(await one(store, 'x'), { _id: 'x', n: 1, tags: [] });
    assert.equal((await c.update({ _id: 'x' }, { $set: { _id: 'x', n: 2 } }, {})).numberAffected, 1, 'keeping _id is allowed');
  });

  it('says what is wrong with an update of a large value in a short message', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    const big = 'x'.repeat(1024 * 1024);
    await c.insert({ _id: 'x', n: 1, s: big });
    for (const modifier of [{ $set: { a: big }, $push: { n: 1 } }, { $set: { 's.deep': 1 } }, { $inc: { n: big } }]) {
      await assert.rejects(c.update({ _id: 'x' }, modifier, {}), (error: Error) => {
        assert.ok(error.message.length < 1000, `${error.message.length} characters: ${error.message.slice(0, 300)}`);
        return true;
      });
    }
  });

  it('replaces documents, keeping _id and natural position', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    for (const id of ['a', 'b', 'c']) await c.insert({ _id: id, old: true });
    await c.update({ _id: 'a' }, { fresh: 1 }, {});
    assert.deepEqual(await one(store, 'a'), { _id: 'a', fresh: 1 });
    assert.deepEqual(await ids(store), ['a', 'b', 'c']);
  });

  it('updates every match with multi, and only the first without', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    for (let i = 0; i < 3; i++) await c.insert({ _id: `m${i}`, g: 1, n: i });
    assert.equal((await c.update({ g: 1 }, { $inc: { n: 10 } }, {})).numberAffected, 1);
    assert.equal((await c.update({ g: 1 }, { $inc: { n: 10 } }, { multi: true })).numberAffected, 3);
    const { docs } = await c.find(q());
    assert.deepEqual(
      docs.map((doc) => doc.n),
      [20, 11, 12],
    );
  });

  it('upserts from the selector equalities, with $setOnInsert only on insert', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    const selector = { name: 'ann', $and: [{ age: { $eq: 30 } }], score: { $gt: 1 }, re: /x/ };
    const first = await c.update(selector, { $set: { score: 5 }, $setOnInsert: { created: 1 } }, { upsert: true, insertedId: 'u1' });
    assert.equal(first.numberAffected, 1);
    assert.equal(first.insertedId, 'u1');
    assert.deepEqual(await one(store, 'u1'), { _id: 'u1', name: 'ann', age: 30, score: 5, created: 1 });
    const second = await c.update({ name: 'ann' }, { $set: { score: 6 }, $setOnInsert: { created: 2 } }, { upsert: true, insertedId: 'u2' });
    assert.equal(second.numberAffected, 1);
    assert.equal(second.insertedId, undefined);
    assert.deepEqual(await one(store, 'u1'), { _id: 'u1', name: 'ann', age: 30, score: 6, created: 1 });

    await c.update({ _id: 'given', 'a.b': 1 }, { $inc: { n: 1 } }, { upsert: true });
    assert.deepEqual(await one(store, 'given'), { _id: 'given', a: { b: 1 }, n: 1 });
    await c.update({ k: 1 }, { name: 'replacement' }, { upsert: true, insertedId: 'r1' });
    assert.deepEqual(await one(store, 'r1'), { _id: 'r1', name: 'replacement' });
    await assert.rejects(c.update({ k: 2 }, { $set: { x: 1 } }, { upsert: true }), /upsert needs an _id/);
    await assert.rejects(c.update({ _id: 'u1', name: 'bob' }, { $set: { x: 1 } }, { upsert: true }), DuplicateKeyError);
  });

  it('sorts, skips, limits, projects and counts', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    for (let i = 0; i < 6; i++) await c.insert({ _id: `p${i}`, group: i % 2, n: 6 - i, nested: { a: i, b: 'x' } });
    assert.deepEqual(await ids(store, q({}, { limit: 2 })), ['p0', 'p1'], 'natural order');
    assert.deepEqual(await ids(store, q({}, { sort: [['group', 1]] })), ['p0', 'p2', 'p4', 'p1', 'p3', 'p5'], 'ties by _id');
    const { docs } = await c.find(
      q({}, { sort: [['group', 1], ['n', -1]], skip: 1, limit: 2, projection: { n: 1 } }),
    );
    assert.deepEqual(docs, [
      { _id: 'p2', n: 4 },
      { _id: 'p4', n: 2 },
    ]);
    assert.deepEqual((await c.find(q({ _id: 'p1' }, { projection: { nested: 0, group: 0 } }))).docs, [{ _id: 'p1', n: 5 }]);
    assert.deepEqual((await c.find(q({ _id: 'p1' }, { projection: { 'nested.a': 1, _id: 0 } }))).docs, [{ nested: { a: 1 } }]);
    assert.equal(await c.count(q({ group: 0 })), 3);
    assert.equal(await c.count(q({ group: 0 }, { skip: 1, limit: 1 })), 1);
    assert.equal(await c.count(q({ group: 0 }, { skip: 5 })), 0);
    assert.deepEqual(await ids(store, q({ _id: { $in: ['p5', 'p0', 'nope'] } })), ['p0', 'p5']);
  });
});

describe('embedded store: indexes', () => {
  it('enforces unique keys on insert, update, upsert and index creation', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    assert.equal(await c.createIndex({ email: 1 }, { unique: true }), 'email_1');
    await c.insert({ _id: 1, email: 'a' });
    await c.insert({ _id: 2, email: 'b' });
    await assert.rejects(c.insert({ _id: 3, email: 'a' }), (error: unknown) => {
      assert.ok(error instanceof DuplicateKeyError);
      assert.equal(error.index, 'email_1');
      assert.match(error.message, /E11000 duplicate key error collection: c index: email_1 dup key: \{"email":"a"\}/);
      return true;
    });
    await assert.rejects(c.update({ _id: 2 }, { $set: { email: 'a' } }, {}), DuplicateKeyError);
    await assert.rejects(c.update({ _id: 9 }, { $set: { email: 'a' } }, { upsert: true }), DuplicateKeyError);
    assert.deepEqual((await c.find(q())).docs, [
      { _id: 1, email: 'a' },
      { _id: 2, email: 'b' },
    ]);
    await c.update({ _id: 2 }, { $set: { email: 'c' } }, {});
    await c.insert({ _id: 3, email: 'b' }); // the old key was released

    const d = store.collection('d');
    await d.insert({ _id: 1, name: 'x' });
    await d.insert({ _id: 2, name: 'x' });
    await assert.rejects(d.createIndex({ name: 1 }, { unique: true }), DuplicateKeyError);
    await d.insert({ _id: 3, name: 'x' }); // nothing was created
    assert.equal(await d.createIndex({ name: 1 }), 'name_1');
  });

  it('checks a multi update as one batch: all or nothing', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    await c.createIndex({ u: 1 }, { unique: true });
    await c.insert({ _id: 1, u: 1, g: 1 });
    await c.insert({ _id: 2, u: 2, g: 1 });
    await assert.rejects(c.update({ g: 1 }, { $set: { u: 5 } }, { multi: true }), DuplicateKeyError);
    assert.deepEqual(await ids(store, q({ u: { $in: [1, 2] } })), [1, 2]);
    await c.update({ g: 1 }, { $inc: { u: 1 } }, { multi: true }); // keys move within the batch
    assert.deepEqual((await c.find(q())).docs.map((doc) => doc.u), [2, 3]);
    // One document that cannot take the modifier: the error names it, and none of the others changed.
    await c.insert({ _id: 3, u: 'three', g: 1 });
    await assert.rejects(c.update({ g: 1 }, { $inc: { u: 1 }, $set: { seen: true } }, { multi: true }), /to document 3: Cannot apply \$inc to field 'u' of non-numeric type string/);
    assert.deepEqual((await c.find(q())).docs.map((doc) => [doc.u, doc.seen]), [[2, undefined], [3, undefined], ['three', undefined]]);
    // One modifier for all of them: applied to each (and a no-op one changes nothing).
    await c.update({ g: 1 }, { $set: { g: 1 } }, { multi: true });
    await c.update({ _id: { $in: [1, 2] } }, { $set: { seen: true } }, { multi: true });
    assert.deepEqual((await c.find(q())).docs.map((doc) => doc.seen), [true, true, undefined]);
  });

  it('keys missing fields as null unless sparse', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    await c.createIndex({ a: 1 }, { unique: true });
    await c.createIndex({ s: 1 }, { unique: true, sparse: true });
    await c.insert({ _id: 1 });
    await assert.rejects(c.insert({ _id: 2 }), /dup key: \{"a":null\}/);
    await assert.rejects(c.insert({ _id: 2, a: null }), DuplicateKeyError);
    await c.insert({ _id: 2, a: 2 });
    await c.insert({ _id: 3, a: 3, s: 1 });
    await assert.rejects(c.insert({ _id: 4, a: 4, s: 1 }), /index: s_1/);
  });

  it('indexes each array element (multikey), tuples for compound keys, and EJSON values', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    await c.createIndex({ tags: 1 }, { unique: true });
    await c.insert({ _id: 1, tags: ['a', 'b'] });
    await assert.rejects(c.insert({ _id: 2, tags: ['b'] }), /dup key: \{"tags":"b"\}/);
    await c.insert({ _id: 2, tags: ['c', 'c'] });
    await assert.rejects(c.update({ _id: 2 }, { $push: { tags: 'a' } }, {}), DuplicateKeyError);
    assert.deepEqual(await ids(store, q({ tags: 'c' })), [2]);

    const d = store.collection('d');
    assert.equal(await d.createIndex({ a: 1, b: -1 }, { unique: true }), 'a_1_b_-1');
    await d.insert({ _id: 1, a: 1, b: 1 });
    await d.insert({ _id: 2, a: 1, b: 2 });
    await assert.rejects(d.insert({ _id: 3, a: 1, b: 1 }), /dup key: \{"a":1,"b":1\}/);

    const e = store.collection('e');
    await e.createIndex({ when: 1 }, { unique: true });
    await e.createIndex({ ref: 1 }, { unique: true, sparse: true });
    await e.insert({ _id: 1, when: new Date(5), ref: new ObjectID('0123456789abcdef01234567') });
    await assert.rejects(e.insert({ _id: 2, when: new Date(5) }), DuplicateKeyError);
    await assert.rejects(e.insert({ _id: 2, when: 5, ref: new ObjectID('0123456789abcdef01234567') }), /index: ref_1/);
    await e.insert({ _id: 2, when: 5, ref: '0123456789abcdef01234567' }); // a string is not an ObjectID
  });

  it('creates indexes idempotently, rejects conflicts and drops them', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    assert.equal(await c.createIndex({ a: 1 }, { unique: true }), 'a_1');
    const seq = store.stats().lastSeq;
    assert.equal(await c.createIndex({ a: 1 }, { unique: true }), 'a_1');
    assert.equal(store.stats().lastSeq, seq, 'nothing logged');
    await assert.rejects(c.createIndex({ a: 1 }), /conflicts with the existing index/);
    await assert.rejects(c.createIndex({ b: 1 }, { name: 'a_1' }), /conflicts with the existing index/);
    await assert.rejects(c.createIndex({ a: 1 }, { unique: true, name: 'other' }), /conflicts/);
    assert.equal(await c.createIndex({ _id: 1 }), '_id_');
    await assert.rejects(c.dropIndex('_id_'), /cannot drop _id index/);
    await assert.rejects(c.dropIndex('nope'), /index not found with name \[nope\]/);
    await c.insert({ _id: 1, a: 1 });
    await c.dropIndex('a_1');
    await c.insert({ _id: 2, a: 1 });
    assert.equal(await c.createIndex({ a: 1 }), 'a_1');
  });

  it('answers index lookups like a scan, in natural order', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    await c.createIndex({ g: 1 });
    await c.createIndex({ 'sub.k': 1 });
    for (let i = 0; i < 6; i++) await c.insert({ _id: `i${i}`, g: i % 3, sub: [{ k: i }, { k: 'all' }] });
    await c.update({ _id: 'i0' }, { $set: { g: 1 } }, {});
    await c.update({ _id: 'i4' }, { $set: { g: 0 } }, {});
    assert.deepEqual(await ids(store, q({ g: 1 })), ['i0', 'i1']);
    assert.deepEqual(await ids(store, q({ g: { $eq: 0 } })), ['i3', 'i4']);
    assert.deepEqual(await ids(store, q({ g: 0, _id: { $ne: 'i3' } })), ['i4']);
    assert.deepEqual(await ids(store, q({ 'sub.k': 'all', g: 2 })), ['i2', 'i5']);
    assert.deepEqual(await ids(store, q({ 'sub.k': 4 })), ['i4']);
    assert.deepEqual(await ids(store, q({ g: 7 })), []);
  });

  it('drops a collection: every document (with a remove event each) and its indexes', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    await c.createIndex({ a: 1 }, { unique: true });
    await c.insert({ _id: 1, a: 1 });
    await c.insert({ _id: 2, a: 2 });
    const events: ChangeEvent[] = [];
    store.changes.watch('c', (event) => events.push(event));
    await c.drop();
    assert.deepEqual(
      events.map((event) => [event.op, (event as DocumentChange).id]),
      [
        ['remove', 1],
        ['remove', 2],
      ],
    );
    assert.deepEqual(await ids(store), []);
    assert.equal(store.stats().collections, 0);
    await c.insert({ _id: 3, a: 1 });
    await c.insert({ _id: 4, a: 1 });
  });
});

describe('embedded store: change events', () => {
  it('dispatches one event per change, in seq order, once durable and before acknowledging', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    const events: DocumentChange[] = [];
    const acknowledged: string[] = [];
    const ackedAtDispatch: number[] = [];
    store.changes.watch('c', (event) => {
      events.push(event as DocumentChange);
      ackedAtDispatch.push(acknowledged.length);
    });
    store.changes.watch('other', () => assert.fail('an event of another collection'));
    const writes = [
      c.insert({ _id: 'a', n: 1 }).then(() => acknowledged.push('insert')),
      c.update({ _id: 'a' }, { $set: { n: 2 } }, {}).then(() => acknowledged.push('update')),
      c.update({ _id: 'a' }, { $set: { n: 2 } }, {}).then(() => acknowledged.push('no-op')),
      c.remove({ _id: 'a' }).then(() => acknowledged.push('remove')),
    ];
    assert.equal(events.length, 0, 'nothing is dispatched before the batch is durable');
    await Promise.all(writes);
    assert.deepEqual(events, [
      { seq: 1, collection: 'c', op: 'insert', id: 'a', doc: { _id: 'a', n: 1 } },
      { seq: 2, collection: 'c', op: 'update', id: 'a', doc: { _id: 'a', n: 2 } },
      { seq: 3, collection: 'c', op: 'remove', id: 'a' },
    ]);
    assert.deepEqual(ackedAtDispatch, [0, 0, 0], 'one batch: all events before any acknowledgement');
    assert.deepEqual(acknowledged, ['insert', 'update', 'no-op', 'remove']);
  });

  it('isolates listeners that throw', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    const seen: unknown[] = [];
    store.changes.watch('c', () => {
      throw new Error('listener bug');
    });
    store.changes.watch('c', (event) => seen.push((event as DocumentChange).id));
    await c.insert({ _id: 'a' });
    await c.insert({ _id: 'b' });
    assert.deepEqual(seen, ['a', 'b']);
    assert.ok(logLines.some((line) => line.includes('change listener threw') && line.includes('listener bug')));
  });

  it('stops delivering to an unwatched listener', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    const seen: unknown[] = [];
    const unwatch = store.changes.watch('c', (event) => seen.push((event as DocumentChange).id));
    await c.insert({ _id: 'a' });
    unwatch();
    await c.insert({ _id: 'b' });
    assert.deepEqual(seen, ['a']);
  });

  it('tells when a write has been delivered', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    const { token } = await c.insert({ _id: 'a' });
    assert.equal(store.changes.delivered(token), token);
    const events: ChangeEvent[] = [];
    store.changes.watch('c', (event) => events.push(event));
    const pending = c.insert({ _id: 'b' });
    const delivered = store.changes.delivered(store.stats().lastSeq);
    assert.ok(delivered instanceof Promise);
    assert.equal(await delivered, 2);
    assert.equal(events.length, 1);
    assert.equal((await pending).token, 2);
    const noop = await c.update({ _id: 'a' }, { $set: {} }, {});
    assert.equal(noop.token, 2, 'a write that changed nothing carries the last seq');
  });

  it('gives reads a position that orders them against events', async () => {
    const store = await open(tempDir());
    const c = store.collection('c');
    const events: ChangeEvent[] = [];
    store.changes.watch('c', (event) => events.push(event));
    await c.insert({ _id: 'a' });
    const { position } = await c.find(q());
    assert.equal(position, events[0]!.seq);
    await c.insert({ _id: 'b' });
    assert.ok(events[1]!.seq > position!);
    assert.deepEqual(
      events.map((event) => event.seq),
      [1, 2],
    );
  });
});

describe('embedded store: persistence', () => {
  it('refuses a document holding an invalid Date, which the log could not give back, and opens again with the rest', async () => {
    const dir = tempDir();
    const store = await open(dir);
    const c = store.collection('c');
    await c.insert({ _id: 'a', at: new Date(5) });
    const invalid = /Cannot store an invalid Date \(at [\w.]+\): dates must be within/;
    await assert.rejects(c.insert({ _id: 'b', nested: { list: [1, new Date(NaN)] } }), invalid);
    await assert.rejects(c.update({ _id: 'a' }, { $set: { at: new Date(8.64e15 + 1) } }, {}), invalid);
    await assert.rejects(c.update({ _id: 'u' }, { $set: { at: new Date('junk') } }, { upsert: true, insertedId: 'u' }), invalid);
    await assert.rejects(c.update({ _id: 'a' }, { _id: 'a', at: new Date(NaN) }, {}), invalid);
    assert.deepEqual((await c.find(q())).docs, [{ _id: 'a', at: new Date(5) }], 'nothing refused is visible');
    await store.close();
    const reopened = await open(dir);
    assert.deepEqual((await reopened.collection('c').find(q())).docs, [{ _id: 'a', at: new Date(5) }]);
  });

  it('survives close and reopen, EJSON types, order and indexes included', async () => {
    const dir = tempDir();
    const oid = new ObjectID('0123456789abcdef01234567');
    const rich = {
      _id: oid,
      when: new Date(1700000000123),
      bin: new Uint8Array([0, 1, 255]),
      nested: { list: [new Date(5), { deep: new ObjectID('abcdefabcdefabcdefabcdef') }] },
      tagged: { $date: 'not a date' },
      nan: NaN,
    };
    let store = await open(dir);
    let c = store.collection('c');
    await c.createIndex({ when: 1 }, { unique: true, sparse: true, name: 'by_when' });
    await c.insert(rich);
    for (const id of ['x', 'y', 'z']) await c.insert({ _id: id });
    await c.update({ _id: 'x' }, { $set: { changed: true } }, {});
    await c.insert({ _id: 7, n: 1 });
    await c.remove({ _id: 'y' });
    await store.collection('other').insert({ _id: 'o' });
    await store.close();

    store = await open(dir);
    c = store.collection('c');
    const stored = await one(store, oid);
    assert.ok(EJSON.equals(stored, rich), EJSON.stringify(stored));
    assert.ok(stored!._id instanceof ObjectID);
    assert.deepEqual(await ids(store), [oid, 'x', 'z', 7]);
    assert.deepEqual(await one(store, 'x'), { _id: 'x', changed: true });
    assert.deepEqual(await ids(store, { collection: 'other', selector: {} }), ['o']);
    await assert.rejects(c.insert({ _id: 'w', when: new Date(1700000000123) }), /index: by_when/);
    assert.equal(store.stats().lastSeq, 9);
    await c.insert({ _id: 'after' });
    assert.equal(store.stats().lastSeq, 10, 'seqs continue after a restart');
  });

  it('syncs to disk before acknowledging with fsync: true', async () => {
    const dir = tempDir();
    let store = await open(dir, { fsync: true });
    await Promise.all([store.collection('c').insert({ _id: 'a' }), store.collection('c').insert({ _id: 'b' })]);
    await store.compact();
    await store.collection('c').insert({ _id: 'c' });
    await store.close();
    store = await open(dir);
    assert.deepEqual(await ids(store), ['a', 'b', 'c']);
  });

  it('compacts into a snapshot and reopens from it', async () => {
    const dir = tempDir();
    let store = await open(dir, { compactThresholdBytes: 2000 });
    const c = store.collection('c');
    await c.createIndex({ n: 1 }, { unique: true });
    for (let i = 0; i < 50; i++) await c.insert({ _id: `d${i}`, n: i, at: new Date(i) });
    await c.update({ n: { $lt: 10 } }, { $set: { low: true } }, { multi: true });
    await c.remove({ n: { $gte: 40 } });
    await store.compact(); // joins the automatic compaction if one is running
    assert.ok(store.stats().compactions >= 1);
    const files = listDataFiles(dir);
    assert.equal(files.snapshots.length, 1);
    assert.equal(files.logs.length, 1, 'older logs are deleted');
    await c.insert({ _id: 'late', n: 100 });
    const expected = (await c.find(q())).docs;
    const lastSeq = store.stats().lastSeq;
    await store.close();

    store = await open(dir);
    assert.ok(EJSON.equals((await store.collection('c').find(q())).docs, expected));
    assert.equal(store.stats().lastSeq, lastSeq);
    await assert.rejects(store.collection('c').insert({ _id: 'dup', n: 1 }), DuplicateKeyError);
  });

  it('recovers from a crash at any step of compaction', async () => {
    const dir = tempDir();
    let store = await open(dir);
    let c = store.collection('c');
    await c.createIndex({ n: 1 }, { unique: true });
    for (let i = 0; i < 20; i++) await c.insert({ _id: `d${i}`, n: i });
    await c.update({ _id: 'd1' }, { $set: { x: 1 } }, {});
    await c.remove({ _id: 'd2' });
    const beforeCompaction = (await c.find(q())).docs;
    await store.close();
    const firstLog = fs.readFileSync(path.join(dir, logFileName(1)));

    store = await open(dir);
    c = store.collection('c');
    await store.compact();
    await c.insert({ _id: 'late', n: 100 });
    await c.remove({ _id: 'd3' });
    const afterCompaction = (await c.find(q())).docs;
    await store.close();
    const files = listDataFiles(dir);
    assert.equal(files.snapshots.length, 1);
    assert.deepEqual(
      files.logs.map((log) => log.generation),
      [2],
    );
    const snapshotName = path.basename(files.snapshots[0]!.path);
    const snapshot = fs.readFileSync(files.snapshots[0]!.path);
    const secondLog = fs.readFileSync(files.logs[0]!.path);

    const states: Array<[string, Record<string, Buffer>, Document[]]> = [
      ['snapshot half written', { [logFileName(1)]: firstLog, [`${snapshotName}.tmp`]: snapshot.subarray(0, 200) }, beforeCompaction],
      [
        'snapshot written, not yet renamed; writes in the new log',
        { [logFileName(1)]: firstLog, [`${snapshotName}.tmp`]: snapshot, [logFileName(2)]: secondLog },
        afterCompaction,
      ],
      [
        'snapshot renamed, nothing written to the new log yet',
        { [logFileName(1)]: firstLog, [snapshotName]: snapshot, [logFileName(2)]: Buffer.alloc(0) },
        beforeCompaction,
      ],
      [
        'snapshot renamed, old log not yet deleted',
        { [logFileName(1)]: firstLog, [snapshotName]: snapshot, [logFileName(2)]: secondLog },
        afterCompaction,
      ],
      [
        'snapshot damaged: the logs still cover everything',
        { [logFileName(1)]: firstLog, [snapshotName]: snapshot.subarray(0, snapshot.length - 5), [logFileName(2)]: secondLog },
        afterCompaction,
      ],
      ['compaction complete', { [snapshotName]: snapshot, [logFileName(2)]: secondLog }, afterCompaction],
    ];
    for (const [state, contents, expected] of states) {
      const crashed = tempDir();
      for (const [name, data] of Object.entries(contents)) fs.writeFileSync(path.join(crashed, name), data);
      const reopened = await open(crashed);
      const docs = (await reopened.collection('c').find(q())).docs;
      assert.ok(EJSON.equals(docs, expected), `${state}: ${EJSON.stringify(docs.map((doc) => doc._id))}`);
      await assert.rejects(reopened.collection('c').insert({ _id: 'dup', n: 5 }), DuplicateKeyError, state);
      await reopened.collection('c').insert({ _id: 'next', n: 1000 });
      await reopened.close();
      const again = await open(crashed);
      assert.equal((await again.collection('c').find(q({ _id: 'next' }))).docs.length, 1, state);
      assert.equal(listDataFiles(crashed).temporary.length, 0, state);
    }
  });

  it('rejects operations after close', async () => {
    const dir = tempDir();
    const store = await open(dir);
    const c = store.collection('c');
    const pending = c.insert({ _id: 'a' });
    await store.close();
    await pending;
    await assert.rejects(c.find(q()), /is closed/);
    await assert.rejects(c.insert({ _id: 'b' }), /is closed/);
    await assert.rejects(store.compact(), /is closed/);
    const reopened = await open(dir);
    assert.deepEqual(await ids(reopened), ['a'], 'close flushed the pending write');
  });
});
