/** Live queries on the embedded store: shared per distinct query, maintained from change events. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { Collection } from '../src/collections/collection.js';
import { Database, openDatabase } from '../src/collections/database.js';
import type { Document, FindOptions } from '../src/data/types.js';
import { clone, equals } from '../src/ddp/ejson.js';
import { createWithSeeds } from '../src/ddp/random.js';
import { liveQueryMetrics } from '../src/reactive/reactive-metrics.js';
import { LiveQueryRegistry } from '../src/reactive/registry.js';
import { WriteFence } from '../src/reactive/write-fence.js';
import { runInWriteScope } from '../src/reactive/write-scope.js';
import './helpers.js';
import { HeldReads, ReshapingDriver } from './reshaping-driver.js';

type Event = [kind: string, id: unknown, fields?: Record<string, unknown>];

/** Observes a cursor, recording every callback and keeping the result it describes. */
async function watch(cursor: ReturnType<Collection['find']>) {
  const events: Event[] = [];
  const docs = new Map<string, Record<string, unknown>>();
  const handle = await cursor.observeChangesAsync({
    added: (id, fields) => {
      assert.ok(!docs.has(String(id)), `added twice: ${String(id)}`);
      events.push(['added', id, fields]);
      docs.set(String(id), { ...fields });
    },
    changed: (id, fields) => {
      assert.ok(docs.has(String(id)), `changed unknown: ${String(id)}`);
      events.push(['changed', id, fields]);
      const doc = docs.get(String(id))!;
      for (const [k, v] of Object.entries(fields)) {
        if (v === undefined) delete doc[k];
        else doc[k] = v;
      }
    },
    removed: (id) => {
      assert.ok(docs.has(String(id)), `removed unknown: ${String(id)}`);
      events.push(['removed', id]);
      docs.delete(String(id));
    },
  });
  return {
    events,
    docs,
    handle,
    take(): Event[] {
      return events.splice(0);
    },
  };
}

async function expected(collection: Collection, selector: Document, options: FindOptions): Promise<Map<string, Document>> {
  const out = new Map<string, Document>();
  for (const doc of await collection.find(selector, options).fetchAsync()) {
    const { _id, ...fields } = doc;
    out.set(String(_id), fields);
  }
  return out;
}

describe('live queries', () => {
  let dir: string;
  let database: Database;
  let items: Collection;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'perseid-lq-'));
    database = await openDatabase({ dataDir: dir });
  });
  after(async () => {
    await database.close();
    rmSync(dir, { recursive: true, force: true });
  });
  let n = 0;
  beforeEach(() => {
    items = new Collection(`items${++n}`, { database });
  });

  it('runs one live query per distinct query, however the selector is written', async () => {
    const created = liveQueryMetrics.created.get();
    const reused = liveQueryMetrics.reused.get();
    const a = await watch(items.find({ a: 1, b: { $gt: 1, $lt: 5 } }));
    const b = await watch(items.find({ b: { $lt: 5, $gt: 1 }, a: 1 }));
    const c = await watch(items.find({ a: 1 }));
    assert.equal(liveQueryMetrics.created.get() - created, 2);
    assert.equal(liveQueryMetrics.reused.get() - reused, 1);
    assert.equal(database.liveQueries.list().filter((q) => q.collection === items.name).length, 2);
    for (const w of [a, b, c]) w.handle.stop();
    assert.equal(database.liveQueries.list().filter((q) => q.collection === items.name).length, 0);
  });

  it('attaches and detaches 30,000 observers of one query in linear time (each copied the whole list)', async () => {
    await items.insertAsync({ n: 1 });
    const handles: Array<{ stop(): void }> = [];
    const blocks: number[] = [];
    let started = performance.now();
    for (let i = 1; i <= 30000; i++) {
      handles.push(await items.find({}).observeChangesAsync({ added() {} }));
      if (i % 3000 === 0) {
        blocks.push(performance.now() - started);
        started = performance.now();
      }
    }
    const [first, last] = [blocks[0]!, blocks.at(-1)!];
    assert.ok(last < 3 * first + 50, `the last 3,000 took ${Math.round(last)} ms, the first ${Math.round(first)} ms`);
    started = performance.now();
    for (const handle of handles) handle.stop();
    const stopping = performance.now() - started;
    assert.ok(stopping < 2000, `stopping them all took ${Math.round(stopping)} ms`);
    assert.equal(database.liveQueries.list().filter((q) => q.collection === items.name).length, 0);
  });

  it('tells every observer of a change even when one stops itself, or another, while it is told', async () => {
    const id = await items.insertAsync({ n: 1 });
    const told: string[] = [];
    const handles: Record<string, { stop(): void }> = {};
    for (const name of ['a', 'b', 'c', 'd']) {
      handles[name] = await items.find({}).observeChangesAsync({
        changed() {
          told.push(name);
          if (name === 'a') handles.a!.stop();
          if (name === 'b') handles.c!.stop();
        },
      });
    }
    await items.updateAsync({ _id: id as string }, { $set: { n: 2 } });
    assert.deepEqual(told.sort(), ['a', 'b', 'c', 'd']);
    told.length = 0;
    await items.updateAsync({ _id: id as string }, { $set: { n: 3 } });
    assert.deepEqual(told.sort(), ['b', 'd'], 'the stopped ones are told no more');
    for (const handle of Object.values(handles)) handle.stop();
  });

  it('applies inserts, updates and removes from change events without reading the database', async () => {
    await items.insertAsync({ _id: 'a', color: 'red', size: 1, secret: 'x' });
    const w = await watch(items.find({ color: 'red' }, { fields: { secret: 0 } }));
    assert.deepEqual(w.take(), [['added', 'a', { color: 'red', size: 1 }]]);
    const reads = liveQueryMetrics.docsRead.get();

    await items.insertAsync({ _id: 'b', color: 'red', size: 2 });
    await items.insertAsync({ _id: 'c', color: 'blue', size: 3 });
    await items.updateAsync('a', { $set: { size: 5 } });
    await items.updateAsync('a', { $set: { secret: 'y' } });
    await items.updateAsync('c', { $set: { color: 'red' } });
    await items.updateAsync('b', { $set: { color: 'green' } });
    await items.updateAsync('a', { $unset: { size: '' } });
    await items.removeAsync('c');
    assert.deepEqual(w.take(), [
      ['added', 'b', { color: 'red', size: 2 }],
      ['changed', 'a', { size: 5 }],
      ['added', 'c', { color: 'red', size: 3 }],
      ['removed', 'b'],
      ['changed', 'a', { size: undefined }],
      ['removed', 'c'],
    ]);
    assert.equal(liveQueryMetrics.docsRead.get(), reads, 'no database read after the initial query');
    w.handle.stop();
  });

  it('keeps a sorted, limited window right from its buffer, re-querying only when it runs dry', async () => {
    for (let i = 1; i <= 30; i++) await items.insertAsync({ _id: `d${i}`, n: i });
    const options: FindOptions = { sort: { n: 1 }, limit: 3 };
    const w = await watch(items.find({}, options));
    assert.deepEqual([...w.docs.keys()], ['d1', 'd2', 'd3']);
    const requeries = liveQueryMetrics.requeries.get();
    await items.removeAsync('d2');
    await items.insertAsync({ _id: 'd0', n: 0 });
    await items.updateAsync('d1', { $set: { n: 100 } });
    await items.updateAsync('d3', { $set: { n: 3.5 } });
    assert.deepEqual(w.docs, await expected(items, {}, options));
    assert.equal(liveQueryMetrics.requeries.get(), requeries, 'changes inside the buffer need no query');
    // Remove more than the buffer holds: the window must refill from the database.
    for (let i = 4; i <= 25; i++) await items.removeAsync(`d${i}`);
    await waitFor(async () => equals(Object.fromEntries(w.docs), Object.fromEntries(await expected(items, {}, options))));
    w.handle.stop();
  });

  it('keeps a window right when it must re-read while it reads one changed document: the re-read waits, so no older result undoes a later change', async () => {
    // Updates arrive by id alone (as the MongoDB driver publishes its own), so each costs a read
    // of the document; every read is held until the test releases it.
    const reads = new HeldReads();
    const driver = new ReshapingDriver(database.driver, reads.pause);
    driver.shape = { kind: 'id' };
    const registry = new LiveQueryRegistry(driver, { requeryThrottleMs: 0, windowBuffer: 1 });
    const data = database.driver.collection(items.name);
    for (let i = 1; i <= 6; i++) await data.insert({ _id: `d${i}`, n: i });
    const shown = new Map<string, Record<string, unknown>>();
    const labels: unknown[] = []; // d3's, as shown
    reads.openAll();
    await registry.observe(
      { collection: items.name, selector: {}, sort: [['n', 1], ['_id', 1]], limit: 3 },
      {
        onChange: (change) => {
          if (change.kind === 'removed') shown.delete(change.key);
          else shown.set(change.key, { ...change.after });
          if (change.key === 'd3' && change.after) labels.push(change.after.label);
        },
      },
    );
    reads.close();
    // One batch: the window (d1, d2, d3 and the buffer's d4) loses two documents, so it must
    // re-read (its timer: 0 ms), and d3 changes, so it reads d3.
    await Promise.all([data.remove({ _id: { $in: ['d1', 'd2'] } }), data.update({ _id: 'd3' }, { $set: { label: 'x' } }, {})]);
    const releaseD3 = await reads.next((query) => query.selector._id === 'd3');
    // Timers of the same delay fire in the order they were set: the re-read's is due first.
    await new Promise((resolve) => setTimeout(resolve, 0));
    releaseD3();
    const releaseReread = await reads.next((query) => query.selector._id === undefined);
    // A change while the re-read is out: its result, read before the change, must not undo it.
    driver.shape = { kind: 'doc' };
    const { token } = await data.update({ _id: 'd3' }, { $set: { label: 'y' } }, {});
    releaseReread();
    reads.openAll();
    await registry.settled(items.name, token);
    assert.deepEqual(labels, [undefined, 'x', 'y'], 'd3 never went back to its older version');
    assert.deepEqual(shown, await expected(items, {}, { sort: { n: 1 }, limit: 3 }));
    registry.stopAll();
  });

  it('handles skip with sort, and a projection that hides the sort field', async () => {
    for (let i = 1; i <= 12; i++) await items.insertAsync({ _id: `s${i}`, n: i, label: `L${i}` });
    const options: FindOptions = { sort: { n: -1 }, skip: 2, limit: 3, fields: { label: 1 } };
    const w = await watch(items.find({ n: { $gt: 2 } }, options));
    assert.deepEqual(w.docs, await expected(items, { n: { $gt: 2 } }, options));
    await items.insertAsync({ _id: 's99', n: 99, label: 'top' });
    await items.removeAsync('s12');
    await items.updateAsync('s5', { $set: { n: 50 } });
    await items.updateAsync('s9', { $set: { label: 'renamed' } });
    assert.deepEqual(w.docs, await expected(items, { n: { $gt: 2 } }, options));
    w.handle.stop();
  });

  it('keeps a window right when its projection hides the sort field and a document in it changes', async () => {
    await items.insertAsync({ _id: 'a', color: 'b', n: 1 });
    await items.insertAsync({ _id: 'b', color: 'a', n: 1 });
    const options: FindOptions = { sort: { color: 1 }, limit: 1, fields: { n: 1 } };
    const w = await watch(items.find({}, options));
    assert.deepEqual(w.take(), [['added', 'b', { n: 1 }]]);
    // A change to a published field only: 'b' still sorts first.
    await items.updateAsync('b', { $set: { n: 5 } });
    assert.deepEqual(w.take(), [['changed', 'b', { n: 5 }]]);
    assert.deepEqual(w.docs, await expected(items, {}, options));
    w.handle.stop();
  });

  it('re-runs queries a single document cannot decide, throttled, and write fences wait for them', async () => {
    for (let i = 1; i <= 5; i++) await items.insertAsync({ _id: `r${i}`, n: i });
    const w = await watch(items.find({}, { limit: 2 }));
    assert.equal(database.liveQueries.list().find((q) => q.collection === items.name)?.strategy, 'requery');
    assert.equal(w.docs.size, 2);
    const fence = new WriteFence();
    await runInWriteScope({ fence }, async () => {
      await items.removeAsync({});
    });
    await new Promise<void>((resolve) => fence.arm(resolve));
    assert.equal(w.docs.size, 0, 'the fence fired only after the re-query applied the removal');
    w.handle.stop();
  });

  it('does not apply twice the writes that land while the initial query runs', async () => {
    const writes: Array<Promise<unknown>> = [];
    for (let i = 0; i < 200; i++) writes.push(items.insertAsync({ _id: `w${i}`, n: i }));
    const watching = watch(items.find({ n: { $gte: 0 } }));
    for (let i = 200; i < 400; i++) writes.push(items.insertAsync({ _id: `w${i}`, n: i }));
    await Promise.all(writes);
    const w = await watching;
    await items.insertAsync({ _id: 'last', n: 1000 });
    assert.deepEqual(w.docs, await expected(items, { n: { $gte: 0 } }, {}));
    w.handle.stop();
  });

  it('stays equal to a fresh query through random writes, for many query shapes at once', async () => {
    for (const seed of ['model-1', 'model-2', 'model-3']) await modelRun(items.name + seed, seed);
  });

  async function modelRun(name: string, seed: string): Promise<void> {
    items = new Collection(name, { database });
    const random = createWithSeeds(seed);
    const shapes: Array<[Document, FindOptions]> = [
      [{}, {}],
      [{ color: 'red' }, {}],
      [{ n: { $gte: 10 } }, { fields: { n: 1, color: 1 } }],
      [{}, { sort: { n: 1 }, limit: 5 }],
      [{ color: { $in: ['red', 'blue'] } }, { sort: { n: -1, _id: 1 }, limit: 4, skip: 2 }],
      [{}, { sort: { color: 1, n: 1 }, skip: 3 }],
      [{ tags: 'b' }, { sort: { n: 1 }, limit: 3, fields: { tags: 1 } }],
      [{ $or: [{ n: { $lt: 5 } }, { color: 'green' }] }, {}],
      [{}, { limit: 3 }],
      [{}, { sort: { n: -1, _id: 1 }, skip: 5, limit: 10 }],
      [{ n: { $gte: 3 } }, { sort: { n: 1, _id: -1 }, skip: 1, limit: 1 }],
    ];
    const watchers = await Promise.all(shapes.map(([s, o]) => watch(items.find(s, o))));
    const colors = ['red', 'blue', 'green', undefined];
    for (let step = 0; step < 600; step++) {
      const id = `m${Math.floor(random.fraction() * 40)}`;
      const roll = random.fraction();
      const n = Math.floor(random.fraction() * 30);
      const color = random.choice(colors);
      if (roll < 0.4) {
        await items.upsertAsync(id, { $set: { n, ...(color ? { color } : {}), tags: random.fraction() < 0.5 ? ['a', 'b'] : ['c'] } });
      } else if (roll < 0.7) {
        await items.updateAsync(id, color ? { $set: { color } } : { $unset: { color: '' } });
      } else if (roll < 0.85) {
        await items.updateAsync({ n: { $lt: n } }, { $inc: { n: 3 } }, { multi: true });
      } else {
        await items.removeAsync(id);
      }
      if (step % 25 === 24) {
        await settle(database, items.name);
        for (const [i, [s, o]] of shapes.entries()) {
          assert.deepEqual(watchers[i]!.docs, await expected(items, s, o), `shape ${i} after step ${step}`);
        }
      }
    }
    for (const w of watchers) w.handle.stop();
  }

  it('drops its queue and re-reads when changes pile up faster than it applies them', async () => {
    // Hold the initial read open (a slow database) while changes arrive.
    const held = new Database(database.driver, { maxQueuedChanges: 5 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const driver = held.driver.collection(items.name);
    const find = driver.find.bind(driver);
    driver.find = async (query) => {
      await gate;
      return find(query);
    };
    const slow = new Collection(items.name, { database: held });
    const fell = liveQueryMetrics.fellBehind.get();
    const watching = watch(slow.find({}));
    for (let i = 0; i < 50; i++) await items.insertAsync({ _id: `b${i}`, n: i });
    release();
    const w = await watching;
    driver.find = find;
    assert.ok(liveQueryMetrics.fellBehind.get() > fell, 'the queue overflowed');
    await waitFor(async () => w.docs.size === 50);
    assert.deepEqual(w.docs, await expected(items, {}, {}));
    w.handle.stop();
    held.liveQueries.stopAll();
  });

  it('tells the other observers of a change when an app callback throws or rejects, and carries on', async () => {
    await items.insertAsync({ _id: 'x', n: 1 });
    // Attached first, so told first: one throws, one rejects (left unhandled, that ended the process).
    const throwing = await items.find().observeChangesAsync({
      changed: () => {
        throw new Error('an app bug');
      },
    });
    const rejecting = await items.find().observeAsync({ changed: () => Promise.reject(new Error('an async app bug')) });
    const other = await watch(items.find());
    await items.updateAsync('x', { $set: { n: 2 } });
    await items.updateAsync('x', { $set: { n: 3 } });
    await settle(database, items.name);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(other.take(), [
      ['added', 'x', { n: 1 }],
      ['changed', 'x', { n: 2 }],
      ['changed', 'x', { n: 3 }],
    ]);
    throwing.stop();
    rejecting.stop();
    other.handle.stop();
  });

  it('hands observers copies: mutating callback arguments changes nothing shared', async () => {
    await items.insertAsync({ _id: 'x', nested: { a: 1 } });
    const seen: Array<Record<string, unknown>> = [];
    const handle = await items.find().observeChangesAsync({
      added: (_id, fields) => {
        (fields.nested as { a: number }).a = 999;
        seen.push(fields);
      },
    });
    const again = await watch(items.find());
    assert.deepEqual(again.docs.get('x'), { nested: { a: 1 } });
    const fetched = await items.findOneAsync('x');
    assert.deepEqual(clone(fetched), { _id: 'x', nested: { a: 1 } });
    assert.equal(seen.length, 1);
    handle.stop();
    again.handle.stop();
  });
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Waits until every live query of the collection has applied everything written so far. */
async function settle(database: Database, collection: string): Promise<void> {
  for (;;) {
    const pending = database.liveQueries.list().filter((q) => q.collection === collection).map((q) => q.settled()).filter(Boolean);
    if (pending.length === 0) return;
    await Promise.all(pending);
  }
}
