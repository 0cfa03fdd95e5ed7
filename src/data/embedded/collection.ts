/**
 * One collection of the embedded store: its documents (id key → immutable
 * document; the map's order is the natural order), its indexes, the queries
 * over them and the writes to them. Every state change goes through `apply`,
 * live and during recovery alike; a write validates everything first (types,
 * unique keys for the whole batch), then applies and hands the mutations to
 * its store for logging.
 *
 * Writers work on the newest state, pending writes included (the next write
 * must see them: a unique key just taken, an $inc on top of an $inc); readers
 * see only what is in the log. Until a write is logged its documents' logged
 * versions are kept aside, and reads use those; when a log write fails, the
 * pending writes are undone from them. So a write a client was told failed
 * was never visible, and never comes back.
 */
import { EJSON } from '../../ddp/ejson.js';
import { idStringify } from '../../ddp/ids.js';
import { compileProjection } from '../../query/projection.js';
import { compileSelector, selectorIds } from '../../query/selector.js';
import { compileStableSort, sortsNaturally } from '../../query/sort.js';
import type { ChangeOp } from '../change-source.js';
import { DuplicateKeyError, type CollectionDriver, type IndexDescription, type QueryPlan, type QueryResult, type WriteOutcome } from '../driver.js';
import type { Document, IndexKeys, IndexOptions, QuerySpec, UpdateOptions, UpdateResult } from '../types.js';
import { ID_INDEX, IndexSet, indexSpec, sameIndex, type IndexedChange, type IndexSpec } from './indexes.js';
import { applyModifierToAll, assertValidDocument, buildUpsert, parseModifier } from '../../query/modifier.js';
import { assertLoggable, undefinedToNull, type Mutation } from './records.js';
import { assertDocumentSize } from './document-size.js';
import type { CollectionImage } from './snapshot.js';
import { isOperatorObject } from '../../query/values.js';
import { assertUpdatePaths } from '../../query/update-paths.js';

export interface Entry {
  mutation: Mutation;
  /** The change event the mutation makes, if any. */
  change: ChangeOp | undefined;
  /** Shows the mutation to readers: the store calls it once the mutation is in the log. */
  logged(): void;
}

/** The direction of a `$natural` sort (the collection's insertion order), or undefined for a sort by fields or none. */
function naturalDirection(sort: QuerySpec['sort']): 1 | -1 | undefined {
  if (!sortsNaturally(sort)) return undefined;
  if (sort!.length > 1) throw new Error('Sort by $natural alone on the embedded store: it has no order that combines it with fields');
  return sort![0]![1];
}

/** What a collection needs from its store. */
export interface CollectionHost {
  /** The seq of the last change in the log: what readers see. */
  loggedSeq(): number;
  assertOpen(): void;
  assertWritable(): void;
  /** Logs applied mutations; resolves with the write's token once they are durable and dispatched. */
  commit(entries: readonly Entry[]): Promise<number>;
}

/** A document with writes not yet logged: the version readers see (none: absent), its natural position, and how many writes are pending. */
interface LoggedVersion {
  doc: Document | undefined;
  order: number | undefined;
  pending: number;
}

export class EmbeddedCollection implements CollectionDriver {
  private readonly docs = new Map<string, Document>();
  /** Each document's natural position, to order index and id lookups like a scan. */
  private readonly order = new Map<string, number>();
  private nextOrder = 0;
  private readonly indexes: IndexSet;
  private readonly unlogged = new Map<string, LoggedVersion>();
  /** The index definitions as logged, while a change to them is not yet. */
  private loggedIndexes: { specs: IndexSpec[]; pending: number } | undefined;

  constructor(
    readonly name: string,
    private readonly host: CollectionHost,
  ) {
    this.indexes = new IndexSet(name);
  }

  get size(): number {
    return this.docs.size;
  }

  /** True when the collection does not exist as far as MongoDB semantics go: no documents, no indexes. */
  get isEmpty(): boolean {
    return this.docs.size === 0 && this.indexes.size === 0;
  }

  /** The logged contents, for a snapshot: cheap, because stored documents are immutable. */
  image(): CollectionImage {
    const docs = this.unlogged.size === 0 ? [...this.docs.values()] : [...this.loggedScan()];
    return { name: this.name, indexes: this.loggedIndexes?.specs ?? this.indexes.specs(), docs };
  }

  /** Undoes every write not yet logged (their log write failed): back to what readers see. */
  rollback(): void {
    if (this.unlogged.size === 0 && !this.loggedIndexes) return;
    for (const [id, { doc, order }] of this.unlogged) {
      if (doc) {
        this.docs.set(id, doc);
        this.order.set(id, order!);
      } else {
        this.docs.delete(id);
        this.order.delete(id);
      }
    }
    // The map's order is the natural order: documents brought back go back to their places.
    const placed = [...this.docs].sort(([a], [b]) => this.order.get(a)! - this.order.get(b)!);
    this.docs.clear();
    for (const [id, doc] of placed) this.docs.set(id, doc);
    const specs = this.loggedIndexes?.specs ?? this.indexes.specs();
    this.indexes.clear();
    for (const spec of specs) this.indexes.install(this.indexes.build(spec, this.docs));
    this.unlogged.clear();
    this.loggedIndexes = undefined;
  }

  /** For repair: throws when replaying `mutation` would break a unique index (damage to another record can make it so). */
  checkReplay(mutation: Mutation): void {
    if (mutation.op === 'put') this.indexes.check([{ id: idStringify(mutation.doc._id), doc: mutation.doc }]);
  }

  /**
   * Applies a mutation to memory and returns the change event it makes. Puts
   * and removes cannot fail once validated; a createIndex that fails (duplicate
   * keys) leaves nothing behind.
   */
  apply(mutation: Mutation): ChangeOp | undefined {
    switch (mutation.op) {
      case 'put': {
        const id = idStringify(mutation.doc._id);
        const old = this.docs.get(id);
        this.indexes.replace(id, old, mutation.doc);
        this.docs.set(id, mutation.doc); // an existing key keeps its position
        if (old) return 'update';
        this.order.set(id, this.nextOrder++);
        return 'insert';
      }
      case 'remove': {
        const id = idStringify(mutation.id);
        const old = this.docs.get(id);
        if (!old) return undefined;
        this.indexes.replace(id, old, undefined);
        this.docs.delete(id);
        this.order.delete(id);
        return 'remove';
      }
      case 'createIndex':
        this.indexes.install(this.indexes.build(mutation.index, this.docs));
        return undefined;
      case 'dropIndex':
        this.indexes.drop(mutation.name);
        return undefined;
      case 'dropCollection':
        this.docs.clear();
        this.order.clear();
        this.indexes.clear();
        return undefined;
    }
  }

  async find(query: QuerySpec): Promise<QueryResult> {
    this.host.assertOpen();
    const projection = query.projection && Object.keys(query.projection).length > 0 ? query.projection : undefined;
    const projector = projection && compileProjection(projection);
    const plan: QueryPlan = { stage: 'COLLSCAN', examined: 0 };
    const docs = this.select(query, plan);
    plan.returned = docs.length;
    // Read synchronously with the position, so the pair is exact.
    return { docs: projector ? docs.map((doc) => projector.apply(doc)) : docs, position: this.host.loggedSeq(), plan };
  }

  async count(query: QuerySpec): Promise<number> {
    this.host.assertOpen();
    return this.select({ ...query, sort: undefined }).length;
  }

  async insert(doc: Document): Promise<WriteOutcome> {
    this.host.assertWritable();
    assertValidDocument(doc);
    if (doc._id === undefined) throw new Error('A document to insert needs an _id');
    const stored = EJSON.clone(doc); // the caller keeps its object; the stored one must never change
    this.checkInsert(stored);
    return { token: await this.write([this.put(stored)]) };
  }

  async update(selector: Document, modifier: Document, options: UpdateOptions): Promise<UpdateResult & WriteOutcome> {
    this.host.assertWritable();
    const parsed = parseModifier(modifier);
    assertUpdatePaths(modifier);
    undefinedToNull(parsed.kind === 'replace' ? parsed.doc : parsed.ops); // parsed holds a private copy; mingo skips a $set to undefined
    if (options.multi && parsed.kind === 'replace') throw new Error('multi update only works with $ operators');
    const targets = this.matching(selector, options.multi ? Infinity : 1);
    if (targets.length === 0) {
      if (!options.upsert) return { numberAffected: 0, token: await this.write([]) };
      const doc = buildUpsert(selector, parsed, options.insertedId);
      this.checkInsert(doc);
      return { numberAffected: 1, insertedId: doc._id, token: await this.write([this.put(doc)]) };
    }
    // All new versions are computed and checked before any is applied: a multi update is all or nothing.
    const changed: IndexedChange[] = [];
    const nexts = applyModifierToAll(targets, parsed, { selector, inserting: false });
    targets.forEach((doc, i) => {
      if (nexts[i] !== doc) changed.push({ id: idStringify(doc._id), doc: nexts[i]! });
    });
    this.indexes.check(changed);
    const token = await this.write(changed.map(({ doc }) => this.put(doc)));
    return { numberAffected: targets.length, token };
  }

  async remove(selector: Document): Promise<{ removed: number } & WriteOutcome> {
    this.host.assertWritable();
    const targets = this.matching(selector, Infinity);
    const token = await this.write(targets.map((doc) => ({ op: 'remove', collection: this.name, id: doc._id })));
    return { removed: targets.length, token };
  }

  async createIndex(keys: IndexKeys, options: IndexOptions = {}): Promise<string> {
    this.host.assertWritable();
    const spec = indexSpec(keys, options);
    if (JSON.stringify(spec.keys) === '{"_id":1}' && !spec.sparse && options.name === undefined) {
      await this.write([]);
      return ID_INDEX;
    }
    if (spec.name === ID_INDEX) throw new Error(`The index name ${ID_INDEX} is reserved for the _id index`);
    const existing = this.indexes.get(spec.name) ?? this.indexes.withKeys(spec.keys);
    if (existing && !sameIndex(existing.spec, spec)) {
      throw new Error(
        `Cannot create index ${JSON.stringify(spec)}: it conflicts with the existing index ${JSON.stringify(existing.spec)}`,
      );
    }
    await this.write(existing ? [] : [{ op: 'createIndex', collection: this.name, index: spec }]);
    return spec.name;
  }

  async listIndexes(): Promise<IndexDescription[]> {
    if (this.isEmpty) return [];
    const out: IndexDescription[] = [{ name: ID_INDEX, keys: { _id: 1 }, unique: true }];
    for (const spec of this.indexes.specs()) out.push({ name: spec.name, keys: { ...spec.keys }, unique: spec.unique, partial: spec.sparse });
    return out;
  }

  async dropIndex(name: string): Promise<void> {
    this.host.assertWritable();
    if (name === ID_INDEX) throw new Error('cannot drop _id index');
    if (!this.indexes.get(name)) throw new Error(`index not found with name [${name}] in collection ${this.name}`);
    await this.write([{ op: 'dropIndex', collection: this.name, name }]);
  }

  async drop(): Promise<void> {
    this.host.assertWritable();
    const removals: Mutation[] = [...this.docs.values()].map((doc) => ({ op: 'remove', collection: this.name, id: doc._id }));
    await this.write([...removals, { op: 'dropCollection', collection: this.name }]);
  }

  /** Every new version of a document comes here, before anything is applied. */
  private put(doc: Document): Mutation {
    undefinedToNull(doc);
    assertLoggable(doc);
    assertDocumentSize(doc);
    return { op: 'put', collection: this.name, doc };
  }

  /** Applies validated mutations for writers, then logs them (readers see them then). Even an empty write waits for the current batch. */
  private write(mutations: readonly Mutation[]): Promise<number> {
    return this.host.commit(mutations.map((mutation) => this.applyUnlogged(mutation)));
  }

  private applyUnlogged(mutation: Mutation): Entry {
    if (mutation.op === 'put' || mutation.op === 'remove') {
      const id = idStringify(mutation.op === 'put' ? mutation.doc._id : mutation.id);
      let version = this.unlogged.get(id);
      if (!version) this.unlogged.set(id, (version = { doc: this.docs.get(id), order: this.order.get(id), pending: 0 }));
      version.pending += 1;
      const change = this.apply(mutation);
      const doc = this.docs.get(id);
      const order = this.order.get(id);
      const logged = version;
      return {
        mutation,
        change,
        logged: () => {
          logged.doc = doc;
          logged.order = order;
          if (--logged.pending === 0) this.unlogged.delete(id);
        },
      };
    }
    const indexes = (this.loggedIndexes ??= { specs: this.indexes.specs(), pending: 0 });
    indexes.pending += 1;
    const change = this.apply(mutation);
    const specs = this.indexes.specs();
    return {
      mutation,
      change,
      logged: () => {
        indexes.specs = specs;
        if (--indexes.pending === 0) this.loggedIndexes = undefined;
      },
    };
  }

  private checkInsert(doc: Document): void {
    const id = idStringify(doc._id);
    if (this.docs.has(id)) throw new DuplicateKeyError(this.name, ID_INDEX, { _id: doc._id }, { _id: 1 });
    this.indexes.check([{ id, doc }]);
  }

  /** The first `limit` matching documents in natural order, among writers' (default) or readers' candidates; `plan` learns how many were examined. */
  private matching(selector: Document, limit: number, candidates = this.candidates(selector), plan?: QueryPlan): Document[] {
    const matcher = compileSelector(selector);
    const out: Document[] = [];
    if (limit <= 0) return out;
    let examined = 0;
    for (const doc of candidates) {
      examined++;
      if (matcher.test(doc) && out.push(doc) >= limit) break;
    }
    if (plan) plan.examined = examined;
    return out;
  }

  private select(query: QuerySpec, plan?: QueryPlan): Document[] {
    const skip = query.skip ?? 0;
    const limit = query.limit ? query.limit : Infinity; // 0 means no limit, as in MongoDB
    const natural = naturalDirection(query.sort);
    const sort = natural ? undefined : query.sort;
    // Without a sort (or by $natural ascending), the first matches in natural order are the answer.
    const matches = this.matching(query.selector, sort || natural === -1 ? Infinity : skip + limit, this.loggedCandidates(query.selector, plan), plan);
    if (natural === -1) matches.reverse();
    else if (sort) matches.sort(compileStableSort(sort));
    return skip === 0 && limit >= matches.length ? matches : matches.slice(skip, skip + limit);
  }

  /**
   * The documents that may match, in natural order: those named by `_id`, else
   * those a single-field index holds for a top-level equality (the smallest
   * such set), else all. The matcher re-checks every candidate.
   */
  private candidates(selector: Document, plan?: QueryPlan): Iterable<Document> {
    const ids = this.candidateIds(selector, plan);
    if (!ids) return this.docs.values();
    const keys = [...ids].filter((id) => this.docs.has(id));
    if (keys.length > 1) keys.sort((a, b) => this.order.get(a)! - this.order.get(b)!);
    return keys.map((id) => this.docs.get(id)!);
  }

  /** What readers may see of the candidates: logged versions in their logged places. */
  /** The ids named by `_id`, else by the best index, else undefined (a scan); `plan` learns which. */
  private candidateIds(selector: Document, plan?: QueryPlan): Iterable<string> | undefined {
    const ids = this.idCandidates(selector);
    if (ids) {
      if (plan) plan.stage = 'IDHACK';
      return ids;
    }
    const found = this.indexCandidates(selector);
    if (found && plan) {
      plan.stage = 'IXSCAN';
      plan.index = found.index;
    }
    return found?.ids;
  }

  private loggedCandidates(selector: Document, plan?: QueryPlan): Iterable<Document> {
    if (this.unlogged.size === 0) return this.candidates(selector, plan);
    const ids = this.candidateIds(selector, plan);
    if (!ids) return this.loggedScan();
    const found: Array<[number, Document]> = [];
    for (const id of new Set([...ids, ...this.unlogged.keys()])) {
      const version = this.unlogged.get(id);
      const doc = version ? version.doc : this.docs.get(id);
      if (doc) found.push([version ? version.order! : this.order.get(id)!, doc]);
    }
    return found.sort((a, b) => a[0] - b[0]).map(([, doc]) => doc);
  }

  /** Every document readers see, in natural order: the writers' ones, with logged versions merged back in their places. */
  private *loggedScan(): Generator<Document> {
    const kept = [...this.unlogged.values()].filter((v) => v.doc).sort((a, b) => a.order! - b.order!);
    let next = 0;
    for (const [id, doc] of this.docs) {
      if (this.unlogged.has(id)) continue;
      const position = this.order.get(id)!;
      while (next < kept.length && kept[next]!.order! < position) yield kept[next++]!.doc!;
      yield doc;
    }
    while (next < kept.length) yield kept[next++]!.doc!;
  }

  private idCandidates(selector: Document): Iterable<string> | undefined {
    const ids = selectorIds(selector);
    if (!ids) return undefined;
    try {
      return new Set(ids.map(idStringify));
    } catch {
      return undefined; // a value no document id can have (an object, a RegExp): let the scan decide
    }
  }

  private indexCandidates(selector: Document): { ids: ReadonlySet<string>; index: string } | undefined {
    let best: { ids: ReadonlySet<string>; index: string } | undefined;
    for (const [field, condition] of Object.entries(selector)) {
      if (field.startsWith('$')) continue;
      const value = isOperatorObject(condition) && Object.keys(condition).length === 1 ? condition.$eq : condition;
      const found = this.indexes.lookup(field, value);
      if (found && (!best || found.ids.size < best.ids.size)) best = found;
    }
    return best;
  }
}
