/**
 * The collection API applications use (Meteor 3's async names). Writes made
 * inside a method are fenced (the method's `updated` waits for them to reach the
 * live queries) and take their ids from the method's seeded random stream.
 */
import { clone } from '../ddp/ejson.js';
import { ObjectID } from '../ddp/object-id.js';
import { Random, collectionIdSequence } from '../ddp/random.js';
import { WriteFence } from '../reactive/write-fence.js';
import { currentWriteScope, type WriteScope } from '../reactive/write-scope.js';
import { assertValidDocument, upsertDrawsId } from '../query/modifier.js';
import { normalizeSelector, passedSelector } from '../query/selector.js';
import { Cursor } from './cursor.js';
import { getDefaultDatabase, type Database } from './database.js';
import type { CollectionDriver, WriteOutcome } from '../data/driver.js';
import type { Document, FindOptions, IndexKeys, IndexOptions, Selector } from '../data/types.js';

export interface CollectionOptions {
  /** The database to use; default: the process's default database. */
  database?: Database | Promise<Database>;
  /** `STRING` (Meteor's 17-character ids, default) or `MONGO` (ObjectIDs). */
  idGeneration?: 'STRING' | 'MONGO';
}

export interface UpsertResult {
  numberAffected: number;
  insertedId?: unknown;
}

const NAME = /^[^$\0]+$/;

function assertDocument(value: unknown, what: string): asserts value is Document {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new TypeError(`${what} must be an object`);
  }
}

export class Collection<T extends object = Document> {
  private resolved: Promise<{ database: Database; driver: CollectionDriver }> | undefined;
  private resolvedFrom: Database | Promise<Database> | undefined;

  constructor(
    readonly name: string,
    private readonly options: CollectionOptions = {},
  ) {
    if (typeof name !== 'string' || !NAME.test(name)) throw new Error(`Invalid collection name: ${JSON.stringify(name)}`);
  }

  /**
   * The database and driver, resolved on use so collections can be declared
   * before the database opens; one without its own database follows the
   * default database when that changes.
   */
  resolve(): Promise<{ database: Database; driver: CollectionDriver }> {
    const source = this.options.database ?? getDefaultDatabase();
    if (source !== this.resolvedFrom || !this.resolved) {
      this.resolvedFrom = source;
      this.resolved = Promise.resolve(source).then((database) => ({ database, driver: database.driver.collection(this.name) }));
    }
    return this.resolved;
  }

  find(...args: [selector?: Selector, options?: FindOptions]): Cursor<T> {
    return new Cursor<T>(this, normalizeSelector(passedSelector(args)), args[1] ?? {});
  }

  async findOneAsync(...args: [selector?: Selector, options?: FindOptions]): Promise<T | undefined> {
    const [doc] = await this.find(passedSelector(args), { ...args[1], limit: 1 }).fetchAsync();
    return doc;
  }

  async insertAsync(doc: Partial<T>): Promise<unknown> {
    assertDocument(doc, 'Document to insert');
    const scope = currentWriteScope();
    // Checked here for every driver, as Meteor's client does: MongoDB 5+ would store them.
    assertValidDocument(doc as Document);
    const { _id, ...rest } = clone(doc as Document);
    const id = _id ?? this.newId(scope);
    await this.write(scope, (driver) => driver.insert({ _id: id, ...rest }));
    return id;
  }

  /** Returns the number of documents updated (or upserted). */
  async updateAsync(selector: Selector, modifier: Document, options: { multi?: boolean; upsert?: boolean } = {}): Promise<number> {
    const result = await this.update(selector, modifier, options);
    return result.numberAffected;
  }

  upsertAsync(selector: Selector, modifier: Document, options: { multi?: boolean } = {}): Promise<UpsertResult> {
    return this.update(selector, modifier, { ...options, upsert: true });
  }

  async removeAsync(selector: Selector): Promise<number> {
    const normalized = normalizeSelector(selector);
    const scope = currentWriteScope();
    const { removed } = await this.write(scope, (driver) => driver.remove(normalized));
    return removed;
  }

  async createIndexAsync(keys: IndexKeys, options: IndexOptions = {}): Promise<string> {
    const { driver } = await this.resolve();
    return driver.createIndex(keys, options);
  }

  async dropIndexAsync(name: string): Promise<void> {
    const { driver } = await this.resolve();
    await driver.dropIndex(name);
  }

  async dropCollectionAsync(): Promise<void> {
    const { driver } = await this.resolve();
    await driver.drop();
  }

  private async update(
    selector: Selector,
    modifier: Document,
    options: { multi?: boolean; upsert?: boolean },
  ): Promise<UpsertResult> {
    assertDocument(modifier, 'Modifier');
    const normalized = normalizeSelector(selector);
    const scope = currentWriteScope();
    // The id an upsert would insert is drawn here, like Meteor, so a stub makes the same one.
    const insertedId = options.upsert && upsertDrawsId(selector, normalized) ? this.newId(scope) : undefined;
    // A falsy selector selects nothing (see normalizeSelector): an upsert inserts under the drawn id, as Meteor's does.
    const target = !selector && insertedId !== undefined ? { _id: insertedId } : normalized;
    const result = await this.write(scope, (driver) =>
      driver.update(target, clone(modifier), { multi: options.multi, upsert: options.upsert, insertedId }),
    );
    const out: UpsertResult = { numberAffected: result.numberAffected };
    if (result.insertedId !== undefined) out.insertedId = result.insertedId;
    return out;
  }

  private newId(scope: WriteScope | undefined): unknown {
    const source = scope?.randomStream ? collectionIdSequence(scope.randomStream, this.name) : Random;
    return this.options.idGeneration === 'MONGO' ? new ObjectID(source.hexString(24)) : source.id();
  }

  /** Runs a driver write; inside a method, its fence is held until the live queries have applied it. */
  private async write<R extends WriteOutcome>(scope: WriteScope | undefined, op: (driver: CollectionDriver) => Promise<R>): Promise<R> {
    const { database, driver } = await this.resolve();
    const pending = scope?.fence?.beginWrite();
    let outcome: R;
    try {
      outcome = await op(driver);
    } catch (error) {
      pending?.commit();
      throw error;
    }
    if (pending) WriteFence.commitWhen(pending, database.liveQueries.settled(this.name, outcome.token));
    return outcome;
  }
}
