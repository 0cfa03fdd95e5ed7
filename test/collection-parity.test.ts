/**
 * One collection suite, run on every driver: the embedded store and each
 * running MongoDB-wire stand-in. Where a stand-in differs from MongoDB (see
 * ../shared/services/README.md) that case is skipped on it, with the reason;
 * the behaviour for real MongoDB is never weakened to fit.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Collection } from '../src/collections/collection.js';
import type { Database } from '../src/collections/database.js';
import { EJSON, addType, type EJSONCustomType } from '../src/ddp/ejson.js';
import { ObjectID } from '../src/ddp/object-id.js';
import { embeddedTarget, mongoTargets, type DatabaseTarget, type ServerName } from './databases.js';
import { skipOnMissing } from './skips.js';
import './helpers.js';

class Money implements EJSONCustomType {
  constructor(
    readonly amount: number,
    readonly currency: string,
  ) {}
  typeName(): string {
    return 'money';
  }
  toJSONValue(): unknown {
    return { amount: this.amount, currency: this.currency };
  }
  equals(other: unknown): boolean {
    return other instanceof Money && other.amount === this.amount && other.currency === this.currency;
  }
}
addType('money', (v) => {
  const { amount, currency } = v as { amount: number; currency: string };
  return new Money(amount, currency);
});

const { targets: mongo, missing } = await mongoTargets();
skipOnMissing('the collection API', missing);
// One change source per server is enough here: these cases do not observe changes.
const targets: DatabaseTarget[] = [embeddedTarget(), ...mongo.filter((t) => t.source === 'poll')];

/** A case skipped on the servers that differ from MongoDB there. */
function unless(server: ServerName, differs: Partial<Record<ServerName, string>>): { skip: string | false } {
  const reason = differs[server];
  return { skip: reason ? `${server}: ${reason}` : false };
}

for (const target of targets) {
  describe(`collections on ${target.label}`, () => {
    let database: Database;
    let cleanup: () => Promise<void>;
    let n = 0;
    const collection = <T extends object = Record<string, unknown>>() => new Collection<T>(`parity${++n}`, { database });

    before(async () => {
      ({ database, cleanup } = await target.open());
    });
    after(() => cleanup());

    it('inserts and reads back documents with every EJSON type, by string and ObjectID ids', async () => {
      const c = collection();
      const oid = new ObjectID();
      const doc = {
        _id: 'doc1',
        when: new Date(1700000000000),
        bytes: new Uint8Array([1, 2, 255]),
        ref: oid,
        money: new Money(5, 'EUR'),
        nested: { list: [1, 'two', { three: 3 }], empty: {} },
        nil: null,
      };
      assert.equal(await c.insertAsync(doc), 'doc1');
      assert.ok(EJSON.equals(await c.findOneAsync('doc1'), doc), 'round trip');
      const byOid = await c.insertAsync({ _id: oid, x: 1 });
      assert.ok(EJSON.equals(byOid, oid));
      assert.deepEqual(await c.findOneAsync(oid), { _id: oid, x: 1 });
      const generated = (await c.insertAsync({ x: 2 })) as string;
      assert.match(generated, /^[23456789A-Za-z]{17}$/);
      const mongoIds = new Collection(`parity${++n}`, { database, idGeneration: 'MONGO' });
      assert.ok((await mongoIds.insertAsync({ x: 3 })) instanceof ObjectID);
    });

    it('applies update operators and returns the number of documents affected', async () => {
      const c = collection();
      await c.insertAsync({ _id: 'u', a: 1, b: { c: 1 }, tags: ['x'], n: 10, old: 'v' });
      assert.equal(await c.updateAsync('u', { $set: { 'b.d': 2, a: 2 }, $unset: { 'b.c': '' } }), 1);
      await c.updateAsync('u', { $inc: { n: 5 }, $push: { tags: 'y' } });
      await c.updateAsync('u', { $addToSet: { tags: { $each: ['y', 'z'] } } });
      await c.updateAsync('u', { $pull: { tags: 'x' }, $rename: { old: 'renamed' } });
      await c.updateAsync('u', { $min: { n: 3 }, $max: { a: 7 } });
      await c.updateAsync('u', { $mul: { n: 2 } });
      assert.deepEqual(await c.findOneAsync('u'), { _id: 'u', a: 7, b: { d: 2 }, tags: ['y', 'z'], n: 6, renamed: 'v' });
      assert.equal(await c.updateAsync('missing', { $set: { a: 1 } }), 0);
    });

    it("applies $push's $sort, $slice and $position to an array it creates, as to one that exists", unless(target.server, { ferretdb: "ignores $push's $sort, $slice and $position" }), async () => {
      const c = collection();
      await c.insertAsync({ _id: 'p' });
      await c.updateAsync('p', {
        $push: {
          sorted: { $each: [3, 1, 2], $sort: 1 },
          capped: { $each: [1, 2, 3, 4], $slice: -2 },
          'o.top': { $each: [{ k: 2 }, { k: 9 }, { k: 5 }], $sort: { k: -1 }, $slice: 2 },
        },
      });
      assert.deepEqual(await c.findOneAsync('p'), { _id: 'p', sorted: [1, 2, 3], capped: [3, 4], o: { top: [{ k: 9 }, { k: 5 }] } });
      for (const _id of ['m1', 'm2']) await c.insertAsync({ _id, many: true });
      assert.equal(await c.updateAsync({ many: true }, { $push: { list: { $each: [2, 1], $sort: 1, $position: 0 } } }, { multi: true }), 2);
      assert.deepEqual(await c.find({ many: true }, { sort: { _id: 1 } }).mapAsync((d) => d.list), [[1, 2], [1, 2]]);
      const { insertedId } = await c.upsertAsync({ name: 'new' }, { $push: { recent: { $each: [5, 6, 7], $slice: -2 } } });
      assert.deepEqual(await c.findOneAsync(insertedId as string), { _id: insertedId, name: 'new', recent: [6, 7] });
    });

    it("stores a field set to undefined as null, as MongoDB's driver does", async () => {
      const c = collection();
      await c.insertAsync({ _id: 'u', top: undefined, nested: { v: undefined }, list: [undefined, 1] });
      await c.updateAsync('u', { $set: { later: undefined } });
      assert.deepEqual(await c.findOneAsync('u'), { _id: 'u', top: null, nested: { v: null }, list: [null, 1], later: null });
      assert.equal(await c.find({ top: { $exists: true }, later: { $exists: true } }).countAsync(), 1);
    });

    it('replaces whole documents, keeping the id', async () => {
      const c = collection();
      await c.insertAsync({ _id: 'r', a: 1, b: 2 });
      await c.updateAsync('r', { c: 3 });
      assert.deepEqual(await c.findOneAsync('r'), { _id: 'r', c: 3 });
    });

    it('updates many documents with multi, one without', async () => {
      const c = collection();
      for (let i = 0; i < 5; i++) await c.insertAsync({ _id: `m${i}`, group: i % 2, v: 0 });
      assert.equal(await c.updateAsync({ group: 0 }, { $set: { v: 1 } }, { multi: true }), 3);
      assert.equal(await c.updateAsync({ group: 1 }, { $set: { v: 2 } }), 1);
      assert.equal(await c.find({ v: 1 }).countAsync(), 3);
      assert.equal(await c.find({ v: 2 }).countAsync(), 1);
    });

    it('upserts with $setOnInsert, using the id drawn by the caller, and updates when matched', async () => {
      const c = collection();
      const first = await c.upsertAsync({ email: 'a@b.c' }, { $set: { seen: 1 }, $setOnInsert: { created: true } });
      assert.equal(first.numberAffected, 1);
      assert.match(String(first.insertedId), /^[23456789A-Za-z]{17}$/);
      assert.deepEqual(await c.findOneAsync({ email: 'a@b.c' }), { _id: first.insertedId, email: 'a@b.c', seen: 1, created: true });
      const second = await c.upsertAsync({ email: 'a@b.c' }, { $set: { seen: 2 }, $setOnInsert: { created: false } });
      assert.deepEqual(second, { numberAffected: 1 });
      assert.deepEqual(await c.findOneAsync({ email: 'a@b.c' }), { _id: first.insertedId, email: 'a@b.c', seen: 2, created: true });
      const byId = await c.upsertAsync('given', { $set: { x: 1 } });
      assert.equal(byId.insertedId, 'given');
    });

    it('removes by selector and counts', async () => {
      const c = collection();
      for (let i = 0; i < 6; i++) await c.insertAsync({ _id: `d${i}`, odd: i % 2 === 1 });
      assert.equal(await c.removeAsync({ odd: true }), 3);
      assert.equal(await c.find().countAsync(), 3);
      assert.equal(await c.removeAsync('d0'), 1);
      assert.equal(await c.removeAsync('d0'), 0);
    });

    it('selects nothing with a falsy selector, as Meteor does (find() without one still selects all)', async () => {
      const c = collection<{ _id: string; n?: number }>();
      for (const _id of ['a', 'b']) await c.insertAsync({ _id });
      const missing = undefined as unknown as string; // say, a parameter the caller left out
      assert.equal(await c.findOneAsync(missing), undefined);
      assert.equal(await c.find(null as unknown as string).countAsync(), 0);
      assert.equal(await c.updateAsync(missing, { $set: { n: 1 } }, { multi: true }), 0);
      assert.equal(await c.removeAsync(missing), 0);
      const upserted = await c.upsertAsync(missing, { $set: { n: 2 } });
      assert.equal(typeof upserted.insertedId, 'string', 'an upsert inserts a new document');
      assert.deepEqual(await c.find({ _id: { $in: ['a', 'b'] } }, { sort: { _id: 1 } }).fetchAsync(), [{ _id: 'a' }, { _id: 'b' }]);
      assert.equal(await c.find().countAsync(), 3);
      assert.equal((await c.findOneAsync())?._id !== undefined, true);
    });

    it('sorts, skips, limits and projects', async () => {
      const c = collection();
      for (let i = 0; i < 10; i++) await c.insertAsync({ _id: `s${i}`, n: i % 4, name: `item ${i}`, deep: { x: i, y: -i } });
      const page = await c.find({}, { sort: { n: -1, name: 1 }, skip: 2, limit: 3, fields: { name: 1, 'deep.x': 1 } }).fetchAsync();
      // n desc, then name: item 3, item 7 | item 2, item 6, item 1 | item 5, ...
      assert.deepEqual(page, [
        { _id: 's2', name: 'item 2', deep: { x: 2 } },
        { _id: 's6', name: 'item 6', deep: { x: 6 } },
        { _id: 's1', name: 'item 1', deep: { x: 1 } },
      ]);
      const excluded = await c.find({ n: 0 }, { sort: [['name', 'desc']], fields: { deep: 0, _id: 0 } }).fetchAsync();
      assert.deepEqual(excluded, [
        { n: 0, name: 'item 8' },
        { n: 0, name: 'item 4' },
        { n: 0, name: 'item 0' },
      ]);
      assert.equal(await c.find({}, { skip: 8 }).countAsync(), 2);
      assert.deepEqual(await c.find({ n: 1 }).mapAsync((d) => d._id), ['s1', 's5', 's9']);
    });

    it(
      'keeps the other fields with a $slice projection alone or beside exclusions, as MongoDB does',
      unless(target.server, { ferretdb: 'refuses $slice projections', 'mongo-java-server': 'drops the connection on a $slice projection' }),
      async () => {
        const c = collection();
        const post = { _id: 'p', title: 'T', comments: [1, 2, 3, 4], meta: { tags: ['a', 'b', 'c'], by: 'x' }, secret: 's' };
        await c.insertAsync(post);
        assert.deepEqual(await c.findOneAsync('p', { fields: { comments: { $slice: -2 } } }), { ...post, comments: [3, 4] });
        assert.deepEqual(await c.findOneAsync('p', { fields: { secret: 0, _id: 0, 'meta.tags': { $slice: [1, 1] } } }), {
          title: 'T',
          comments: [1, 2, 3, 4],
          meta: { tags: ['b'], by: 'x' },
        });
        assert.deepEqual(await c.findOneAsync('p', { fields: { title: 1, comments: { $slice: 1 } } }), { _id: 'p', title: 'T', comments: [1] });
      },
    );

    it('sorts by $natural in insertion order, reversed with -1, and a live query of the latest stays right', unless(target.server, { ferretdb: 'refuses $natural on a collection that is not capped' }), async () => {
      const c = collection();
      for (const _id of ['m', 'a', 'z']) await c.insertAsync({ _id });
      const ids = async (sort: Record<string, 1 | -1>, limit?: number) => c.find({}, { sort, limit }).mapAsync((d) => d._id);
      assert.deepEqual(await ids({ $natural: 1 }), ['m', 'a', 'z']);
      assert.deepEqual(await ids({ $natural: -1 }, 2), ['z', 'a']);
      const latest = new Set<unknown>();
      const handle = await c.find({}, { sort: { $natural: -1 }, limit: 2 }).observeChangesAsync({
        added: (id) => void latest.add(id),
        removed: (id) => void latest.delete(id),
      });
      try {
        assert.deepEqual([...latest].sort(), ['a', 'z']);
        await c.insertAsync({ _id: 'b' });
        const deadline = Date.now() + 10_000;
        while (!latest.has('b') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
        assert.deepEqual([...latest].sort(), ['b', 'z']);
      } finally {
        handle.stop();
      }
    });

    it('sorts a missing field as null, ties broken by the next key', async () => {
      const c = collection();
      await c.insertAsync({ _id: 'b' });
      await c.insertAsync({ _id: 'a', n: null });
      await c.insertAsync({ _id: 'c', n: 1 });
      const ids = async (sort: Record<string, 1 | -1>) => (await c.find({}, { sort }).mapAsync((d) => d._id));
      assert.deepEqual(await ids({ n: 1, _id: 1 }), ['a', 'b', 'c']);
      assert.deepEqual(await ids({ n: -1, _id: -1 }), ['c', 'b', 'a']);
    });

    it('adds to a set that already holds a duplicate, keeping it', async () => {
      const c = collection();
      await c.insertAsync({ _id: 'a', tags: ['z', 'z'] });
      await c.updateAsync('a', { $addToSet: { tags: 'y' } });
      await c.updateAsync('a', { $addToSet: { tags: { $each: ['z', 'x', 'x'] } } });
      assert.deepEqual((await c.findOneAsync('a'))?.tags, ['z', 'z', 'y', 'x']);
    });

    it('adds to a set a document whose fields are in another order, as MongoDB compares documents', async () => {
      const c = collection();
      await c.insertAsync({ _id: 'a', pairs: [{ x: 1, y: 2 }] });
      await c.updateAsync('a', { $addToSet: { pairs: { $each: [{ x: 1, y: 2 }, { y: 2, x: 1 }] } } });
      const pairs = (await c.findOneAsync('a'))!.pairs as Array<Record<string, number>>;
      assert.deepEqual(pairs.map((p) => Object.keys(p).join()), ['x,y', 'y,x']);
    });

    it('evaluates MongoDB query operators', async () => {
      const c = collection();
      await c.insertAsync({ _id: 'a', tags: ['red', 'blue'], n: 1, name: 'Alpha', items: [{ k: 1, v: 'x' }, { k: 2, v: 'y' }] });
      await c.insertAsync({ _id: 'b', tags: ['green'], n: 5, name: 'beta' });
      await c.insertAsync({ _id: 'c', n: null, name: 'Gamma', items: [{ k: 2, v: 'z' }] });
      const ids = async (selector: Record<string, unknown>) => (await c.find(selector, { sort: { _id: 1 } }).fetchAsync()).map((d) => d._id);
      assert.deepEqual(await ids({ tags: 'red' }), ['a']);
      assert.deepEqual(await ids({ n: { $in: [1, 5] } }), ['a', 'b']);
      assert.deepEqual(await ids({ n: { $nin: [1] } }), ['b', 'c']);
      assert.deepEqual(await ids({ tags: { $exists: false } }), ['c']);
      assert.deepEqual(await ids({ name: { $regex: '^[ab]', $options: 'i' } }), ['a', 'b']);
      assert.deepEqual(await ids({ name: /a$/ }), ['a', 'b', 'c']);
      assert.deepEqual(await ids({ $or: [{ n: 5 }, { name: 'Gamma' }] }), ['b', 'c']);
      assert.deepEqual(await ids({ n: { $not: { $gt: 2 } } }), ['a', 'c']);
      assert.deepEqual(await ids({ tags: { $size: 2 } }), ['a']);
      assert.deepEqual(await ids({ 'items.k': 2 }), ['a', 'c']);
      assert.deepEqual(await ids({ n: null }), ['c']);
    });

    it("matches $type on an array's elements, as MongoDB does", async () => {
      const c = collection();
      await c.insertAsync({ _id: 'mixed', v: ['x', 1] });
      await c.insertAsync({ _id: 'string', v: 'x' });
      await c.insertAsync({ _id: 'objects', v: [{ k: 1 }] });
      await c.insertAsync({ _id: 'dates', v: [new Date(0), null] });
      await c.insertAsync({ _id: 'empty', v: [] });
      const ids = async (selector: Record<string, unknown>) => (await c.find(selector, { sort: { _id: 1 } }).fetchAsync()).map((d) => d._id);
      assert.deepEqual(await ids({ v: { $type: 'string' } }), ['mixed', 'string']);
      assert.deepEqual(await ids({ v: { $type: 'number' } }), ['mixed']);
      assert.deepEqual(await ids({ v: { $type: 'object' } }), ['objects']);
      assert.deepEqual(await ids({ v: { $type: ['date', 'null'] } }), ['dates']);
      assert.deepEqual(await ids({ v: { $type: 'array' } }), ['dates', 'empty', 'mixed', 'objects']);
      assert.deepEqual(await ids({ 'v.k': { $type: 'number' } }), ['objects']);
    });

    it('matches $elemMatch with several field conditions', unless(target.server, { ferretdb: '$elemMatch with field conditions fails with "unknown operator"' }), async () => {
      const c = collection();
      await c.insertAsync({ _id: 'a', items: [{ k: 1, v: 'x' }, { k: 2, v: 'y' }] });
      await c.insertAsync({ _id: 'b', items: [{ k: 1, v: 'y' }] });
      const found = await c.find({ items: { $elemMatch: { k: 1, v: 'y' } } }).fetchAsync();
      assert.deepEqual(found.map((d) => d._id), ['b']);
    });

    it('enforces unique indexes on insert and upsert with MongoDB\'s error', async () => {
      const c = collection();
      await c.createIndexAsync({ email: 1 }, { unique: true });
      await c.insertAsync({ email: 'x@y.z' });
      await assert.rejects(c.insertAsync({ email: 'x@y.z' }), (e: { code?: number }) => e.code === 11000);
      await assert.rejects(c.insertAsync({ _id: (await c.findOneAsync({ email: 'x@y.z' }))!._id }), (e: { code?: number }) => e.code === 11000);
      assert.equal(await c.find().countAsync(), 1);
    });

    it(
      "names the duplicated key and the index's keys in keyValue and keyPattern, as MongoDB's driver does",
      unless(target.server, { ferretdb: 'sends neither with E11000', 'mongo-java-server': 'sends neither with E11000' }),
      async () => {
        const c = collection();
        await c.createIndexAsync({ room: 1, seat: -1 }, { unique: true });
        await c.insertAsync({ _id: 'first', room: 'a', seat: 1 });
        const duplicate = (e: { code?: number; keyValue?: unknown; keyPattern?: unknown }) => {
          assert.equal(e.code, 11000);
          assert.deepEqual({ keyValue: e.keyValue, keyPattern: e.keyPattern }, { keyValue: { room: 'a', seat: 1 }, keyPattern: { room: 1, seat: -1 } });
          return true;
        };
        await assert.rejects(c.insertAsync({ room: 'a', seat: 1 }), duplicate);
        await assert.rejects(c.insertAsync({ _id: 'first' }), (e: { keyValue?: unknown; keyPattern?: unknown }) => {
          assert.deepEqual({ keyValue: e.keyValue, keyPattern: e.keyPattern }, { keyValue: { _id: 'first' }, keyPattern: { _id: 1 } });
          return true;
        });
      },
    );

    it('reports a duplicate made by an update as 11000', unless(target.server, { ferretdb: 'answers code 1 (InternalError, "UNIQUE constraint failed")' }), async () => {
      const c = collection();
      await c.createIndexAsync({ email: 1 }, { unique: true });
      await c.insertAsync({ _id: 'one', email: 'a' });
      await c.insertAsync({ _id: 'two', email: 'b' });
      await assert.rejects(c.updateAsync('two', { $set: { email: 'a' } }), (e: { code?: number }) => e.code === 11000);
      assert.deepEqual(await c.findOneAsync('two'), { _id: 'two', email: 'b' });
    });

    it('treats a missing field as null in a unique index', unless(target.server, { ferretdb: 'documents missing the indexed field never collide' }), async () => {
      const c = collection();
      await c.createIndexAsync({ code: 1 }, { unique: true });
      await c.insertAsync({ _id: 'first' });
      await assert.rejects(c.insertAsync({ _id: 'second' }), (e: { code?: number }) => e.code === 11000);
      const sparse = collection();
      await sparse.createIndexAsync({ code: 1 }, { unique: true, sparse: true });
      await sparse.insertAsync({ _id: 'first' });
      await sparse.insertAsync({ _id: 'second' });
    });

    it(
      'refuses an update path with an empty part or a $-prefixed one, changing nothing',
      unless(target.server, { 'mongo-java-server': "stores a field named '' for $set {'': 1} or {'.x': 1}, and renames to ''" }),
      async () => {
        const c = collection();
        await c.insertAsync({ _id: 'p', a: 1, o: {} });
        for (const modifier of [
          { $set: { '': 1 } },
          { $set: { 'b..c': 1 } },
          { $set: { 'b.': 1 } },
          { $set: { '.b': 1 } },
          { $inc: { 'o..n': 1 } },
          { $push: { '': 1 } },
          { $unset: { '': 1 } },
          { $rename: { a: '' } },
          { $set: { 'o.$x': 1 } },
        ]) {
          await assert.rejects(c.updateAsync('p', modifier), JSON.stringify(modifier));
        }
        assert.deepEqual(await c.findOneAsync('p'), { _id: 'p', a: 1, o: {} });
      },
    );

    it(
      "refuses a document over MongoDB's 16 MiB limit, inserted or grown by an update, and takes one just under it",
      unless(target.server, {
        ferretdb: 'stores a 16.1 MiB document',
        'mongo-java-server': 'drops the connection on a 16.1 MiB insert, and stores a document an update grows past 16 MiB',
      }),
      async () => {
        const c = collection();
        const MiB = 1024 * 1024;
        await assert.rejects(c.insertAsync({ _id: 'over', s: 'x'.repeat(16 * MiB) }));
        assert.equal(await c.findOneAsync('over'), undefined);
        await c.insertAsync({ _id: 'under', s: 'x'.repeat(16 * MiB - 100) });
        await assert.rejects(c.updateAsync('under', { $set: { more: 'y'.repeat(200) } }));
        assert.deepEqual(Object.keys((await c.findOneAsync('under'))!), ['_id', 's']);
      },
    );

    it('iterates a cursor with forEachAsync and for await', async () => {
      const c = collection<{ _id: string; n: number }>();
      for (let i = 0; i < 3; i++) await c.insertAsync({ _id: `i${i}`, n: i });
      const seen: number[] = [];
      await c.find({}, { sort: { n: 1 } }).forEachAsync((doc) => {
        seen.push(doc.n);
      });
      for await (const doc of c.find({}, { sort: { n: -1 } })) seen.push(doc.n);
      assert.deepEqual(seen, [0, 1, 2, 2, 1, 0]);
    });

    it('rejects malformed writes with an error', async () => {
      const c = collection();
      await c.insertAsync({ _id: 'w', a: 1 });
      await assert.rejects(c.updateAsync('w', { $set: { a: 2 }, b: 1 }));
      await assert.rejects(c.updateAsync('w', { $set: { _id: 'other' } }));
      await assert.rejects(c.insertAsync({ $bad: 1 }), /field names cannot start with '\$'/);
      await assert.rejects(c.insertAsync({ 'a.b': 1 }), /contain '\.'/);
      assert.deepEqual(await c.findOneAsync('w'), { _id: 'w', a: 1 });
    });
  });
}
