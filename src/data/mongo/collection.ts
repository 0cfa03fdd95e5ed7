/**
 * One MongoDB collection behind the collection API, through the official
 * driver. Every write returns a token naming the documents it touched and how
 * many change events it produces, so the method's write fence can wait for the
 * change feed to bring them back (see change-hub.ts).
 */
import type { Collection as RawCollection, Document as BsonDocument } from 'mongodb';
import { idStringify } from '../../ddp/ids.js';
import { selectorIds } from '../../query/selector.js';
import type { CollectionDriver, IndexDescription, QueryPlan, QueryResult, WriteOutcome } from '../driver.js';
import type { Document, IndexKeys, IndexOptions, QuerySpec, UpdateOptions, UpdateResult } from '../types.js';
import type { ChangeHub, WriteToken } from './change-hub.js';
import type { ClientHolder } from './client-holder.js';
import type { PublishedChange } from './fanout-feeder.js';
import { fromMongoDocument, storedForm, toMongo } from './values.js';

export interface MongoCollectionHost {
  readonly hub: ChangeHub;
  /** Whether fences need the ids a multi-document write touched (false when polling: it re-reads anyway). */
  readonly tracksIds: boolean;
  /** Tells the feeder this process wrote to `collection` (the poller re-reads at once). */
  ownWrite(collection: string): void;
  /** Whether inserts are applied here when acknowledged (ChangeHub.insertedHere): the feed reports every change in order. */
  readonly appliesInserts: boolean;
  /** With fan-out: the changes a write made (or a resync after a drop), applied here and published for the other servers. */
  publish?(collection: string, changes: PublishedChange[] | 'resync'): void;
  /** Counts documents read from MongoDB, for the metrics. */
  countRead(n: number): void;
  /** Wraps driver errors (network, server selection) in errors the caller can act on. */
  translate(error: unknown): Error;
}

function isOperatorModifier(modifier: Document): boolean {
  const keys = Object.keys(modifier);
  return keys.length > 0 && keys.every((k) => k.startsWith('$'));
}

export class MongoCollection implements CollectionDriver {
  constructor(
    readonly name: string,
    private readonly clients: ClientHolder,
    private readonly host: MongoCollectionHost,
  ) {}

  /** The driver's collection on the current client (it changes when a wedged client is replaced). */
  private get raw(): RawCollection {
    return this.clients.collection(this.name);
  }

  async insert(doc: Document): Promise<WriteOutcome> {
    const after = this.host.hub.position;
    const stored = toMongo(doc) as BsonDocument;
    await this.call(() => this.raw.insertOne(stored));
    this.host.publish?.(this.name, [{ op: 'insert', id: doc._id, doc }]);
    // Applied now rather than waking the feeder: the feed's next read brings its report, which is dropped.
    if (this.host.appliesInserts) this.host.hub.insertedHere(this.name, doc._id, storedForm(stored), after);
    else this.host.ownWrite(this.name);
    return { token: this.token([doc._id], 1, after) };
  }

  async update(selector: Document, modifier: Document, options: UpdateOptions): Promise<UpdateResult & WriteOutcome> {
    const after = this.host.hub.position;
    const filter = toMongo(selector) as BsonDocument;
    let change = toMongo(modifier) as BsonDocument;
    const operators = isOperatorModifier(modifier);
    if (options.upsert && options.insertedId !== undefined && !('_id' in selector)) {
      // As Meteor does, an upsert inserts with the id the caller chose (a stub predicts the same one).
      const _id = toMongo(options.insertedId);
      change = operators ? { ...change, $setOnInsert: { ...(change.$setOnInsert as BsonDocument | undefined), _id } } : { _id, ...change };
    }
    const ids = await this.touchedIds(selector, filter, options.multi === true);
    const result = await this.call(() => {
      if (!operators) return this.raw.replaceOne(filter, change, { upsert: options.upsert });
      return options.multi ? this.raw.updateMany(filter, change, { upsert: options.upsert }) : this.raw.updateOne(filter, change, { upsert: options.upsert });
    });
    const upserted = result.upsertedCount > 0 ? [result.upsertedId] : [];
    if (this.host.publish) {
      const upsertedId = upserted.length ? (options.insertedId ?? fromMongoDocument({ _id: upserted[0] })._id) : undefined;
      // A replacement is the whole document; an operator update is its modifier (a live query
      // holding the document applies it, another reads the document if it could now match).
      // A document an upsert inserted goes by id alone: its modifier says nothing of the fields
      // it lacks, which a selector like `{owner: null}` or `{}` matches.
      // The ids are those the selector names or matched just before: when the write matched
      // fewer, which ones it changed is unknown, and a server given the change would apply it
      // (or show a replacement) all the same. They then go by id alone, to be read again.
      const known = result.matchedCount === ids.length;
      const events: Array<{ op: 'update'; id: unknown; modifier?: Document; doc?: Document }> =
        result.matchedCount === 0 ? [] : ids.map((id) => (!known ? { op: 'update', id } : operators ? { op: 'update', id, modifier } : { op: 'update', id, doc: { ...modifier, _id: id } }));
      if (upsertedId !== undefined) events.push(operators ? { op: 'update', id: upsertedId } : { op: 'update', id: upsertedId, doc: { ...modifier, _id: upsertedId } });
      if (events.length > 0) this.host.publish(this.name, events);
    }
    this.host.ownWrite(this.name);
    const out: UpdateResult & WriteOutcome = {
      numberAffected: result.matchedCount + result.upsertedCount,
      token: this.token([...ids, ...upserted.map((id) => (id === null ? null : toMongo(id)))], result.modifiedCount + result.upsertedCount, after, ids.length === 0),
    };
    if (upserted.length) out.insertedId = options.insertedId ?? upserted[0];
    return out;
  }

  async remove(selector: Document): Promise<{ removed: number } & WriteOutcome> {
    const after = this.host.hub.position;
    const filter = toMongo(selector) as BsonDocument;
    const ids = await this.touchedIds(selector, filter, true);
    const result = await this.call(() => this.raw.deleteMany(filter));
    // Fewer removed than named or matched before: which ones is unknown, so each is read again (as an update by id).
    const known = result.deletedCount === ids.length;
    if (result.deletedCount > 0) this.host.publish?.(this.name, ids.map((id) => (known ? { op: 'remove', id } : { op: 'update', id })));
    this.host.ownWrite(this.name);
    return { removed: result.deletedCount, token: this.token(ids, result.deletedCount, after, ids.length === 0) };
  }

  private cursorOf(query: QuerySpec) {
    return this.raw.find(toMongo(query.selector) as BsonDocument, {
      sort: query.sort ? (query.sort.map(([path, dir]) => [path, dir]) as Array<[string, 1 | -1]>) : undefined,
      skip: query.skip,
      limit: query.limit,
      projection: query.projection,
    });
  }

  async find(query: QuerySpec): Promise<QueryResult> {
    const cursor = this.cursorOf(query);
    const docs = await this.call(() => cursor.toArray());
    this.host.countRead(docs.length);
    return { docs: docs.map((doc) => fromMongoDocument(doc)) };
  }

  async count(query: QuerySpec): Promise<number> {
    return this.call(() => this.raw.countDocuments(toMongo(query.selector) as BsonDocument, { skip: query.skip, limit: query.limit }));
  }

  /** The plan MongoDB chose for `query` and what it examined (`explain`); undefined where the server has no explain (mongo-java-server). */
  async explain(query: QuerySpec): Promise<QueryPlan | undefined> {
    try {
      const explained = (await this.cursorOf(query).explain('executionStats')) as BsonDocument;
      const stats = explained.executionStats as { totalDocsExamined?: number; nReturned?: number } | undefined;
      const planner = explained.queryPlanner as { winningPlan?: BsonDocument } | undefined;
      let stage = planner?.winningPlan;
      let index: string | undefined;
      const stages: string[] = [];
      while (stage) {
        if (typeof stage.stage === 'string') stages.push(stage.stage);
        if (typeof stage.indexName === 'string') index ??= stage.indexName;
        stage = (stage.inputStage ?? (stage.queryPlan as BsonDocument | undefined)) as BsonDocument | undefined;
      }
      // FerretDB reports its backend's plan instead (SQLite's lines: "SCAN <table>" reads every row).
      const backend = (explained.queryPlanner as { Plan?: unknown } | undefined)?.Plan;
      if (stages.length === 0 && Array.isArray(backend) && backend.every((line) => typeof line === 'string')) {
        stages.push((backend as string[]).some((line) => /\bSCAN\b/.test(line) && !/USING (COVERING )?INDEX/.test(line)) ? 'COLLSCAN' : 'IXSCAN');
      }
      const leaf = stages.at(-1);
      if (!leaf && stats?.totalDocsExamined === undefined) return undefined;
      const plan: QueryPlan = { stage: leaf ?? 'UNKNOWN', sampled: true };
      if (index) plan.index = index;
      if (stats?.totalDocsExamined !== undefined) plan.examined = stats.totalDocsExamined;
      if (stats?.nReturned !== undefined) plan.returned = stats.nReturned;
      return plan;
    } catch {
      return undefined;
    }
  }

  async listIndexes(): Promise<IndexDescription[]> {
    try {
      const list = await this.raw.indexes();
      return list.map((index) => ({
        name: String(index.name),
        keys: index.key as Record<string, number>,
        unique: index.unique === true,
        expires: index.expireAfterSeconds !== undefined,
        partial: index.sparse === true || index.partialFilterExpression !== undefined,
      }));
    } catch {
      return []; // no such collection yet
    }
  }

  async createIndex(keys: IndexKeys, options: IndexOptions = {}): Promise<string> {
    const spec: { unique?: boolean; sparse?: boolean; name?: string } = {};
    if (options.unique) spec.unique = true;
    if (options.sparse) spec.sparse = true;
    if (options.name) spec.name = options.name;
    return this.call(() => this.raw.createIndex(keys, spec));
  }

  async dropIndex(name: string): Promise<void> {
    await this.call(() => this.raw.dropIndex(name));
  }

  async drop(): Promise<void> {
    await this.call(async () => {
      try {
        await this.raw.drop();
      } catch (error) {
        if ((error as { codeName?: string }).codeName !== 'NamespaceNotFound') throw error;
      }
    });
    // Drops are not reported the same way by every feed; the live queries re-read instead.
    if (this.host.publish) this.host.publish(this.name, 'resync');
    else this.host.hub.resync('collection dropped', this.name);
  }

  /**
   * The ids a write will touch, for the fence: named in the selector, or (when
   * the feed reports by id and the write may touch several) read first.
   */
  private async touchedIds(selector: Document, filter: BsonDocument, multi: boolean): Promise<unknown[]> {
    const named = selectorIds(selector);
    if (named) return named;
    if (!this.host.tracksIds) return [];
    const docs = await this.call(() => this.raw.find(filter, { projection: { _id: 1 }, limit: multi ? 0 : 1 }).toArray());
    this.host.countRead(docs.length);
    return docs.map((d) => fromMongoDocument(d)._id);
  }

  private token(ids: unknown[], expect: number, after: number, unknownIds = false): WriteToken {
    // With no ids to look for (polling), there is nothing to wait for here: the re-read is the fence.
    return { collection: this.name, keys: ids.map(idStringify), expect: unknownIds && !this.host.tracksIds ? 0 : expect, after };
  }

  /** Runs an operation with the holder's deadline; driver errors come out as errors the caller can act on. */
  private async call<T>(operation: () => Promise<T>): Promise<T> {
    try {
      return await this.clients.run(operation);
    } catch (error) {
      throw this.host.translate(error);
    }
  }
}
