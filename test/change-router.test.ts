/**
 * Change routing (each change handed only to the live queries it can concern)
 * against handing every change to every live query: the same random writes, in
 * every event shape the drivers produce (whole document, modifier only, id
 * only, removes by id), must leave both with the same results, and those must
 * equal a fresh query. The embedded store does the writes and the reads; its
 * change events are reshaped into the MongoDB drivers' shapes on the way. A
 * failure names the seed to replay (PERSEID_MODEL_SEEDS), the documents shown
 * wrong and the first step whose write the query missed.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { after, before, describe, it } from 'node:test';
import type { ChangeEvent } from '../src/data/change-source.js';
import { openEmbeddedStore, type EmbeddedStore } from '../src/data/embedded/store.js';
import type { Document, QuerySpec } from '../src/data/types.js';
import { idStringify } from '../src/ddp/ids.js';
import { createWithSeeds } from '../src/ddp/random.js';
import type { DocChange } from '../src/reactive/doc-change.js';
import { LiveQueryRegistry, type ObserveHandle } from '../src/reactive/registry.js';
import { liveQueryMetrics } from '../src/reactive/reactive-metrics.js';
import { compileProjection } from '../src/query/projection.js';
import { compileSelector, selectorEqualities } from '../src/query/selector.js';
import { Query } from 'mingo';
import './helpers.js';
import { randomPause, ReshapingDriver } from './reshaping-driver.js';

/** One observer's view of a live query's result. */
function observe(registry: LiveQueryRegistry, spec: QuerySpec): { docs: Map<string, Document>; handle: Promise<ObserveHandle> } {
  const docs = new Map<string, Document>();
  const handle = registry.observe(spec, {
    onChange(change: DocChange) {
      if (change.kind === 'added') {
        assert.ok(!docs.has(change.key), `added twice: ${change.key}`);
        docs.set(change.key, { ...change.after });
      } else if (change.kind === 'removed') {
        assert.ok(docs.delete(change.key), `removed unknown: ${change.key}`);
      } else {
        assert.ok(docs.has(change.key), `changed unknown: ${change.key}`);
        docs.set(change.key, { ...change.after });
      }
    },
  });
  return { docs, handle };
}

const OWNERS = ['u0', 'u1', 'u2', 'u3', 'u4', 'u5'];

function querySpecs(collection: string): QuerySpec[] {
  const specs: QuerySpec[] = [];
  const add = (selector: Document, extra: Partial<QuerySpec> = {}) => specs.push({ collection, selector, ...extra });
  for (const owner of OWNERS) {
    add({ owner });
    add({ owner, read: false }, { projection: { n: 1, read: 1 } });
    add({ owner: { $in: [owner, 'u9'] } }, { sort: [['n', 1], ['_id', 1]], limit: 3 });
    add({ $and: [{ owner }, { n: { $gte: 5 } }] });
    add({ owner, room: 'a' });
    add({ owner: { $eq: owner } }, { sort: [['n', -1], ['_id', 1]], skip: 1, limit: 2 });
  }
  for (let i = 0; i < 12; i++) add({ _id: `d${i}` });
  add({ _id: { $in: ['d1', 'd5', 'd9', 'd30'] } });
  add({ _id: { $in: ['d2', 'd3'] }, owner: 'u1' });
  add({ tags: 'x' });
  add({ tags: { $in: ['y', 'z'] } }, { sort: [['n', 1], ['_id', 1]], limit: 4 });
  add({ n: 5 });
  add({ n: { $in: [1, 2, 3] } });
  add({ read: true });
  add({ room: 'a' });
  add({ 'meta.owner': 'u1' });
  add({ owner: null });
  add({ owner: { $exists: false } });
  add({});
  add({ n: { $gt: 10 } });
  add({ $or: [{ owner: 'u1' }, { room: 'b' }] });
  add({ owner: 'u2' }, { limit: 2 }); // re-run on every change (limit without sort)
  add({}, { sort: [['n', 1], ['_id', 1]], limit: 5 });
  return specs;
}

/** A random modifier over the fields the queries read, some touching the indexed fields in every way. */
function randomModifier(random: ReturnType<typeof createWithSeeds>): Document {
  const owner = random.choice(OWNERS)!;
  const pick = Math.floor(random.fraction() * 14);
  switch (pick) {
    case 0:
      return { $set: { owner } };
    case 1:
      return { $set: { owner: [owner, 'u9'] } };
    case 2:
      return { $unset: { owner: '' } };
    case 3:
      return { $set: { read: random.fraction() < 0.5 } };
    case 4:
      return { $inc: { n: Math.floor(random.fraction() * 5) - 2 } };
    case 5:
      return { $set: { tags: random.fraction() < 0.5 ? ['x'] : ['y', 'q'] } };
    case 6:
      return { $push: { tags: random.choice(['x', 'y', 'z'])! } };
    case 7:
      return { $rename: { owner: 'formerOwner' } };
    case 8:
      return { $rename: { formerOwner: 'owner' } };
    case 9:
      return { $set: { 'meta.owner': owner } };
    case 10:
      return { $set: { n: Math.floor(random.fraction() * 12), owner } };
    case 11:
      return { $set: { room: random.choice(['a', 'b'])! } };
    case 12:
      return { $set: { owner, room: 'a' }, $inc: { n: 1 } };
    default:
      return { $set: { misc: random.fraction() } };
  }
}

function randomDocument(random: ReturnType<typeof createWithSeeds>, id: string): Document {
  const doc: Document = { _id: id, n: Math.floor(random.fraction() * 12), read: random.fraction() < 0.5 };
  const roll = random.fraction();
  if (roll < 0.7) doc.owner = random.choice(OWNERS);
  else if (roll < 0.8) doc.owner = [random.choice(OWNERS), 'u9'];
  else if (roll < 0.85) doc.owner = null;
  if (random.fraction() < 0.5) doc.room = random.choice(['a', 'b']);
  if (random.fraction() < 0.5) doc.tags = random.fraction() < 0.5 ? ['x', 'z'] : 'y';
  if (random.fraction() < 0.2) doc.meta = { owner: random.choice(OWNERS) };
  return doc;
}

async function settleAll(registries: LiveQueryRegistry[]): Promise<void> {
  for (;;) {
    const pending = registries.flatMap((r) => r.list().map((q) => q.settled())).filter(Boolean);
    if (pending.length === 0) return;
    await Promise.all(pending);
  }
}

/**
 * The model test's seeds. PERSEID_MODEL_SEEDS=a,b runs others instead: a seed
 * fixes the writes and the read delays, not how the timers interleave, so
 * replaying a failing seed fails often rather than always.
 */
const MODEL_SEEDS = process.env.PERSEID_MODEL_SEEDS?.split(',').filter(Boolean) ?? ['routing-1', 'routing-2', 'routing-3', 'routing-4'];

/** The steps since the last check, each with the documents it changed: what a failure reports. */
class StepLog {
  private steps: Array<{ step: number; what: string; changed: Map<string, Document | undefined> }> = [];
  /** The collection as the last step left it (the store's documents are immutable: identity tells a change). */
  private last = new Map<string, Document>();

  constructor(private readonly read: () => Promise<Document[]>) {}

  async record(step: number, what: string): Promise<void> {
    const now = new Map((await this.read()).map((doc) => [idStringify(doc._id), doc] as const));
    const changed = new Map<string, Document | undefined>();
    for (const [key, doc] of now) if (this.last.get(key) !== doc) changed.set(key, doc);
    for (const key of this.last.keys()) if (!now.has(key)) changed.set(key, undefined);
    this.last = now;
    this.steps.push({ step, what, changed });
  }

  checked(): void {
    this.steps = [];
  }

  /**
   * The documents `view` has wrong and the steps since the last check that
   * wrote them. For each, the step it was missed at: the first write after the
   * last version it is shown as (or the first write since the last check when
   * it is shown as none of them); the earliest such step is where it diverged.
   */
  explain(spec: QuerySpec, view: Map<string, Document>, truth: Map<string, Document>): string {
    const projector = compileProjection(spec.projection);
    const shownAs = (doc: Document | undefined, shown: Document | undefined) => {
      if (!doc || !shown) return doc === shown;
      const { _id, ...fields } = projector.apply(doc);
      return isDeepStrictEqual(fields, shown);
    };
    const wrong = [...new Set([...view.keys(), ...truth.keys()])].filter((key) => !isDeepStrictEqual(view.get(key), truth.get(key)));
    const lines: string[] = [];
    let first: number | undefined;
    for (const key of wrong) {
      const writes = this.steps.filter(({ changed }) => changed.has(key));
      const shown = view.get(key);
      const last = writes.findLastIndex(({ changed }) => shownAs(changed.get(key), shown));
      const missed = writes[last + 1]?.step;
      if (missed !== undefined) first = Math.min(first ?? missed, missed);
      lines.push(`  ${key}: shown ${JSON.stringify(shown ?? null)}, is ${JSON.stringify(truth.get(key) ?? null)}; ` + (missed !== undefined ? `missed step ${missed}` : writes.length ? 'shown as its latest version' : 'no step since the last check wrote it'));
      for (const { step, what, changed } of writes) lines.push(`    step ${step}: ${what} → ${JSON.stringify(changed.get(key) ?? null)}`);
    }
    return `first diverging step: ${first ?? 'not among the steps since the last check'}\n${lines.join('\n')}`;
  }
}

describe('change routing', () => {
  let dir: string;
  let store: EmbeddedStore;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'perseid-routing-'));
    store = await openEmbeddedStore({ dir });
  });
  after(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('finds the equality constraints a query can be filed under', () => {
    assert.deepEqual([...selectorEqualities({ owner: 'a', n: { $in: [1, 2] }, x: { $gt: 1 }, 'a.b': 1 })], [
      ['owner', ['a']],
      ['n', [1, 2]],
    ]);
    assert.deepEqual([...selectorEqualities({ $and: [{ room: { $eq: 'r' } }, { owner: { $in: ['a', null] } }] })], [['room', ['r']]]);
    assert.deepEqual([...selectorEqualities({ owner: null, doc: { a: 1 }, when: new Date(0), re: /x/ })], []);
    assert.deepEqual([...selectorEqualities({ _id: { $in: ['a', 'b'] } })], [['_id', ['a', 'b']]]);
  });

  it('tests plain equality selectors without mingo exactly as mingo does', () => {
    const random = createWithSeeds('plain-equalities');
    const values: unknown[] = ['a', 'b', '', 1, 2, 0, -0, 1.5, true, false, null, undefined, ['a', 'b'], [1, 2], [['a']], [], { a: 1 }, [{ a: 'a' }], '1'];
    const selectors: Document[] = [{ f: 'a' }, { f: 1 }, { f: 0 }, { f: true }, { f: '' }, { f: 'a', g: 1 }, { _id: 'a' }, { f: false, g: 'b' }];
    for (let i = 0; i < 3000; i++) {
      const doc: Document = { _id: random.choice(['a', 'b', 1])! };
      for (const field of ['f', 'g']) {
        const value = random.choice(values);
        if (value !== undefined) doc[field] = value;
      }
      const selector = random.choice(selectors)!;
      assert.equal(compileSelector(selector).test(doc), new Query(selector).test(doc), `${JSON.stringify(selector)} on ${JSON.stringify(doc)}`);
    }
  });

  it('hands a change to the queries it can concern, not to every query of the collection', async () => {
    const registry = new LiveQueryRegistry(store);
    const handles = await Promise.all(Array.from({ length: 500 }, (_, i) => registry.observe({ collection: 'inbox', selector: { owner: `user${i}` } }, { onChange() {} })));
    const seen = liveQueryMetrics.changesSeen.get();
    const route = (event: ChangeEvent) => registry.routed(event).length;
    for (let i = 0; i < 50; i++) {
      const { token } = await store.collection('inbox').insert({ _id: `m${i}`, owner: `user${i}`, text: 'hi' });
      await registry.settled('inbox', token);
    }
    assert.equal(liveQueryMetrics.changesSeen.get() - seen, 50, 'each insert was examined by its owner’s query only');
    assert.equal(route({ seq: 1, collection: 'inbox', op: 'insert', id: 'z', doc: { _id: 'z', owner: 'user7' } }), 1);
    assert.equal(route({ seq: 1, collection: 'inbox', op: 'insert', id: 'z', doc: { _id: 'z', owner: ['user7', 'user8', 'nobody'] } }), 2);
    assert.equal(route({ seq: 1, collection: 'inbox', op: 'update', id: 'z', modifier: { $set: { text: 'x' } } }), 0, 'touches no field a query reads');
    assert.equal(route({ seq: 1, collection: 'inbox', op: 'update', id: 'm3', modifier: { $set: { text: 'x' } } }), 1, 'the holder of the document');
    assert.equal(route({ seq: 1, collection: 'inbox', op: 'update', id: 'z', modifier: { $set: { owner: 'user3' } } }), 1);
    assert.equal(route({ seq: 1, collection: 'inbox', op: 'update', id: 'm3', modifier: { $set: { owner: 'user4' } } }), 2, 'the holder, and the query it moves to');
    assert.equal(route({ seq: 1, collection: 'inbox', op: 'update', id: 'z', modifier: { $unset: { owner: '' } } }), 500, 'cannot tell: all');
    assert.equal(route({ seq: 1, collection: 'inbox', op: 'update', id: 'm3' }), 500, 'an update by id alone: all');
    assert.equal(route({ seq: 1, collection: 'inbox', op: 'remove', id: 'm3' }), 1, 'the holder of a removed document');
    assert.equal(route({ seq: 1, collection: 'inbox', op: 'remove', id: 'z' }), 0);
    assert.equal(route({ seq: 1, collection: 'inbox', op: 'resync', reason: 'test' }), 500);
    for (const handle of handles) handle.stop();
  });

  for (const seed of MODEL_SEEDS) {
    it(`keeps the same results as unrouted dispatch through random writes of every shape (${seed})`, async () => {
      const random = createWithSeeds(seed);
      const driver = new ReshapingDriver(store, randomPause(() => (random.fraction() < 0.3 ? Math.floor(random.fraction() * 4) : 0)));
      const collection = `model-${seed}`;
      const routed = new LiveQueryRegistry(driver, { routeChanges: true, requeryThrottleMs: 5, windowBuffer: 2 });
      const unrouted = new LiveQueryRegistry(driver, { routeChanges: false, requeryThrottleMs: 5, windowBuffer: 2 });
      const specs = querySpecs(collection);
      const views = specs.map((spec) => ({ spec, routed: observe(routed, spec), unrouted: observe(unrouted, spec) }));
      const data = driver.collection(collection);
      const steps = new StepLog(async () => (await store.collection(collection).find({ collection, selector: {} })).docs);
      const late: Array<{ spec: QuerySpec; routed: ReturnType<typeof observe>; unrouted: ReturnType<typeof observe> }> = [];
      for (let step = 0; step < 700; step++) {
        const id = `d${Math.floor(random.fraction() * 40)}`;
        const roll = random.fraction();
        const shapeRoll = random.fraction();
        const modifier = randomModifier(random);
        driver.shape = { kind: shapeRoll < 0.4 ? 'doc' : shapeRoll < 0.85 ? 'modifier' : 'id', modifier };
        // Some random modifiers cannot apply ($push to a string): the store refuses them and nothing changes.
        const attempt = (write: Promise<unknown>) => write.catch((error: Error) => assert.match(error.message, /push|array|Cannot/i));
        let what: string;
        if (roll < 0.25) {
          const { _id, ...fields } = randomDocument(random, id);
          driver.shape.modifier = { $set: fields };
          what = `upsert ${id} ${JSON.stringify({ $set: fields })}`;
          await data.update({ _id }, { $set: fields }, { upsert: true, insertedId: _id });
        } else if (roll < 0.6) {
          what = `update ${id} ${JSON.stringify(modifier)}`;
          await attempt(data.update({ _id: id }, modifier, {}));
        } else if (roll < 0.68) {
          driver.shape = { kind: shapeRoll < 0.5 ? 'doc' : 'id' }; // a replacement: never a modifier
          const { _id, ...replacement } = randomDocument(random, id);
          what = `replace ${id} by ${JSON.stringify(replacement)}`;
          await data.update({ _id }, replacement, {});
        } else if (roll < 0.76) {
          const selector = { n: { $lt: Math.floor(random.fraction() * 8) } };
          what = `update all ${JSON.stringify(selector)} ${JSON.stringify(modifier)}`;
          await attempt(data.update(selector, modifier, { multi: true }));
        } else if (roll < 0.92) {
          what = `remove ${id}`;
          await data.remove({ _id: id });
        } else if (roll < 0.95) {
          const owner = random.choice(OWNERS)!;
          what = `remove all of ${owner}`;
          await data.remove({ owner });
        } else {
          // A query starting (and another stopping) while changes arrive.
          const spec = random.choice(specs)!;
          what = `observe ${JSON.stringify(spec.selector)} again`;
          late.push({ spec, routed: observe(routed, spec), unrouted: observe(unrouted, spec) });
          if (late.length > 3) {
            const gone = late.shift()!;
            (await gone.routed.handle).stop();
            (await gone.unrouted.handle).stop();
          }
        }
        await steps.record(step, `${what} (events: ${driver.shape.kind})`);
        if (step % 50 === 49) {
          await Promise.all([...views, ...late].flatMap((v) => [v.routed.handle, v.unrouted.handle]));
          await settleAll([routed, unrouted]);
          const truth = new LiveQueryRegistry(store);
          for (const [i, view] of [...views, ...late].entries()) {
            const fresh = observe(truth, view.spec);
            await fresh.handle;
            for (const side of ['unrouted', 'routed'] as const) {
              if (isDeepStrictEqual(view[side].docs, fresh.docs)) continue;
              assert.fail(
                `${side}: query ${i} ${JSON.stringify(view.spec)} differs from a fresh one after step ${step} ` +
                  `(replay with PERSEID_MODEL_SEEDS=${seed}: the same writes and read delays)\n${steps.explain(view.spec, view[side].docs, fresh.docs)}`,
              );
            }
          }
          truth.stopAll();
          steps.checked();
        }
      }
      routed.stopAll();
      unrouted.stopAll();
    });
  }
});

