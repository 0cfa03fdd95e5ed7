/**
 * What the differential run subscribes to and writes: query shapes covering
 * the selector, sort, window and projection cases live queries treat apart,
 * and random documents and writes over a small id pool (so writes collide,
 * move documents across window edges and change sort keys).
 */
import type { RandomGenerator } from '../../src/ddp/random.js';

export type Doc = Record<string, unknown>;

export interface Shape {
  name: string;
  selector: Doc;
  sort?: Array<[string, 1 | -1]>;
  skip?: number;
  limit?: number;
  fields?: Record<string, 0 | 1>;
}

export const SHAPES: Shape[] = [
  { name: 'all', selector: {} },
  { name: 'eq', selector: { color: 'red' } },
  { name: 'in+sort', selector: { color: { $in: ['red', 'blue'] } }, sort: [['n', 1]] },
  { name: 'range', selector: { n: { $gte: 5, $lt: 15 } } },
  { name: 'or', selector: { $or: [{ color: 'green' }, { n: { $lt: 3 } }] } },
  { name: 'ne', selector: { color: { $ne: 'red' } } },
  { name: 'nin', selector: { color: { $nin: ['red', 'green'] } } },
  { name: 'not-exists', selector: { color: { $exists: false } } },
  { name: 'nested', selector: { 'a.b': { $gt: 3 } } },
  { name: 'array-eq', selector: { tags: 'x' } },
  { name: 'eq+and', selector: { $and: [{ k: 1 }, { n: { $gte: 4 } }] } },
  { name: 'top5', selector: {}, sort: [['n', 1]], limit: 5 },
  { name: 'two-keys', selector: {}, sort: [['n', -1], ['k', 1]], skip: 3, limit: 4 },
  { name: 'ties', selector: {}, sort: [['k', 1]], limit: 3 },
  { name: 'ties-desc', selector: { k: { $in: [0, 2] } }, sort: [['k', -1]], skip: 1, limit: 2 },
  { name: 'mixed-types', selector: {}, sort: [['s', 1]], limit: 6 },
  { name: 'mixed-desc', selector: {}, sort: [['s', -1], ['n', 1]], skip: 2, limit: 3 },
  { name: 'nested-sort', selector: { color: 'blue' }, sort: [['a.b', -1]], limit: 3, fields: { color: 1, 'a.b': 1 } },
  // Non-empty arrays: mongo-java-server orders empty ones neither as MongoDB does nor by the next key.
  { name: 'array-sort', selector: { 'tags.0': { $exists: true } }, sort: [['tags', 1]], limit: 4 },
  { name: 'exclude', selector: {}, fields: { tags: 0, a: 0 } },
  { name: 'nested-include', selector: { n: { $exists: true } }, fields: { 'a.c': 1, n: 1 } },
  { name: 'in-window', selector: { tags: { $in: ['x', 'y'] } }, sort: [['n', 1], ['_id', -1]], skip: 2, limit: 3 },
  { name: 'skip-only', selector: {}, sort: [['n', 1]], skip: 5 },
  { name: 'window+fields', selector: { n: { $exists: true } }, sort: [['color', 1], ['n', -1]], limit: 5, fields: { n: 1 } },
  { name: 'eq-window', selector: { k: 2 }, sort: [['n', 1]], limit: 2 },
];

export type WriteOp =
  | { kind: 'insert'; doc: Doc }
  | { kind: 'update'; selector: Doc; modifier: Doc; multi?: boolean; upsert?: boolean }
  | { kind: 'remove'; selector: Doc };

const COLORS = ['red', 'blue', 'green'];
const TAGS = ['x', 'y', 'z'];

export class Model {
  constructor(
    private readonly random: RandomGenerator,
    private readonly ids: number,
  ) {}

  chance(p: number): boolean {
    return this.random.fraction() < p;
  }

  int(n: number): number {
    return Math.floor(this.random.fraction() * n);
  }

  pick<T>(list: readonly T[]): T {
    return list[this.int(list.length)]!;
  }

  /** Ids inserted so far beyond the pool, the last few of which writes also pick. */
  private inserted = 0;

  id(): string {
    if (this.inserted > 0 && this.chance(0.25)) return `e${this.inserted - 1 - this.int(Math.min(10, this.inserted))}`;
    return `d${String(this.int(this.ids)).padStart(2, '0')}`;
  }

  /**
   * A new id for an insert: never one in use (mongo-java-server streams an insert it refused as a duplicate, which
   * MongoDB does not; upserts by id fill the pool instead).
   */
  private freshId(): string {
    return `e${this.inserted++}`;
  }

  /** A value of mixed type, for sorting across types. */
  private mixed(): unknown {
    return this.pick([() => this.int(10), () => `s${this.int(5)}`, () => null, () => this.chance(0.5), () => this.int(10) + 0.5])();
  }

  doc(id = this.id()): Doc {
    const doc: Doc = { _id: id };
    // A number or missing, never null or a string: $inc fails on those, and mongo-java-server then streams none of
    // the changes the rest of an updateMany made (MongoDB streams each). `s` holds the mixed types.
    if (this.chance(0.85)) doc.n = this.int(20);
    doc.k = this.int(3);
    if (this.chance(0.8)) doc.color = this.pick(COLORS);
    if (this.chance(0.8)) doc.s = this.mixed();
    doc.tags = TAGS.filter(() => this.chance(0.4));
    if (this.chance(0.8)) doc.a = { b: this.int(10), c: this.pick(['p', 'q']) };
    return doc;
  }

  private modifier(): Doc {
    switch (this.int(11)) {
      case 0:
        return { $set: { n: this.int(20) } };
      case 1:
        return { $set: { color: this.pick(COLORS) } };
      case 2:
        return { $unset: { color: '' } };
      case 3:
        return { $inc: { n: this.pick([-3, 1, 4]) } };
      case 4:
        return { $push: { tags: this.pick(TAGS) } };
      case 5:
        return { $pull: { tags: this.pick(TAGS) } };
      case 6:
        return { $set: { 'a.b': this.int(10) } };
      case 7:
        return { $set: { s: this.mixed(), k: this.int(3) } };
      case 8:
        return { $unset: { n: '', 'a.c': '' } };
      case 9:
        return { $set: { color: this.pick(COLORS) }, $inc: { n: 2 } };
      default:
        return { $addToSet: { tags: this.pick(TAGS) }, $set: { k: this.int(3) } };
    }
  }

  private multiSelector(): Doc {
    return this.pick<() => Doc>([
      () => ({ n: { $lt: this.int(20) } }),
      () => ({ color: this.pick(COLORS) }),
      () => ({ tags: this.pick(TAGS) }),
      () => ({ k: this.int(3) }),
    ])();
  }

  /** One random write; `direct` ones avoid what a plain client would give an ObjectId (an upsert by a non-id selector). */
  write(direct = false): WriteOp {
    const r = this.random.fraction();
    if (r < 0.18) return { kind: 'insert', doc: this.doc(this.freshId()) };
    if (r < 0.5) return { kind: 'update', selector: { _id: this.id() }, modifier: this.modifier() };
    if (r < 0.6) return { kind: 'update', selector: { _id: this.id() }, modifier: this.replacement() };
    if (r < 0.7) return { kind: 'update', selector: { _id: this.id() }, modifier: this.chance(0.5) ? this.modifier() : this.replacement(), upsert: true };
    if (r < 0.74 && !direct) return { kind: 'update', selector: { color: 'none', k: 9 }, modifier: { $set: { n: this.int(20) } }, upsert: true };
    if (r < 0.84) return { kind: 'update', selector: this.multiSelector(), modifier: this.modifier(), multi: true };
    if (r < 0.95) return { kind: 'remove', selector: { _id: this.id() } };
    return { kind: 'remove', selector: this.multiSelector() };
  }

  private replacement(): Doc {
    const { _id: _ignored, ...rest } = this.doc();
    return rest;
  }
}
