/**
 * Database work as the APM sees it: per collection and operation (count,
 * errors, time), per collection and query shape (operations, time, documents
 * examined against returned, slow operations, the plan last used), and, on
 * MongoDB, per command as the driver's command monitoring reports it. The
 * index advisor reads the shapes; the indexes a collection has come from the
 * database that registered a lister for it.
 */
import { BoundedNames, OTHER } from './bounded-names.js';
import { Histogram } from './histogram.js';
import { queryShape, type QueryShape } from './query-shape.js';

export type DbOperation = 'find' | 'count' | 'insert' | 'update' | 'remove';

/** How a query was run, as the database says (the embedded store for every query; MongoDB's explain, sampled once per shape). */
export interface QueryPlan {
  /** COLLSCAN, IXSCAN, IDHACK (and MongoDB's other stage names). */
  stage: string;
  index?: string;
  /** Documents the query read to find its results. */
  examined?: number;
  returned?: number;
  /** From one explained run of the shape rather than this operation. */
  sampled?: boolean;
}

export interface IndexDescription {
  name: string;
  keys: Record<string, number>;
  unique?: boolean;
  /** A TTL index (MongoDB's expireAfterSeconds): it deletes documents, so it is never advised for dropping. */
  expires?: boolean;
  /** Sparse or partial: it holds only some documents, so it serves only some queries. */
  partial?: boolean;
}

export class OperationStats {
  count = 0;
  errors = 0;
  readonly time = new Histogram();
  constructor(
    readonly collection: string,
    readonly op: string,
  ) {}
}

export class ShapeStats {
  ops = 0;
  timeMs = 0;
  slow = 0;
  returned = 0;
  /** Documents examined, over the operations whose plan said (`measuredOps`). */
  examined = 0;
  measuredOps = 0;
  measuredReturned = 0;
  plan: QueryPlan | undefined;
  firstAt = Date.now();
  lastAt = 0;
  constructor(
    readonly collection: string,
    readonly shape: QueryShape,
  ) {}
}

export class CommandStats {
  count = 0;
  failures = 0;
  readonly time = new Histogram();
  constructor(readonly name: string) {}
}

type IndexLister = (collection: string) => Promise<IndexDescription[]>;

/**
 * What a database's indexes serve: MongoDB's, every condition and sort of the
 * shape; the embedded store's, an equality on an index's first field (it looks
 * those documents up and reads them all).
 */
export type IndexUse = 'any' | 'first-field-equality';

export class DatabaseStats {
  readonly operations = new BoundedNames<OperationStats>(500, () => new OperationStats(OTHER, OTHER));
  readonly shapes = new BoundedNames<ShapeStats>(1000, () => new ShapeStats(OTHER, queryShape({ [OTHER]: 1 })));
  readonly commands = new BoundedNames<CommandStats>(50, (name) => new CommandStats(name));
  /** Operations slower than this count as slow (ms). */
  slowMs = 100;
  private lister: IndexLister | undefined;
  /** What the registered database's indexes serve. */
  indexUse: IndexUse = 'any';

  /** Counts one operation; `shape` for those that select documents. */
  record(collection: string, op: DbOperation, shape: QueryShape | undefined, ms: number, docs: number | undefined, plan: QueryPlan | undefined, failed: boolean): ShapeStats | undefined {
    const operation = this.operations.get(`${collection}\u0000${op}`, () => new OperationStats(collection, op));
    operation.count++;
    if (failed) operation.errors++;
    operation.time.record(ms);
    if (!shape || failed) return undefined;
    const stats = this.shapes.get(`${collection}\u0000${shape.key}`, () => new ShapeStats(collection, shape));
    stats.ops++;
    stats.timeMs += ms;
    stats.lastAt = Date.now();
    if (ms >= this.slowMs) stats.slow++;
    const returned = docs ?? (plan && !plan.sampled ? plan.returned : undefined) ?? 0;
    stats.returned += returned;
    if (plan) {
      stats.plan = plan;
      if (plan.examined !== undefined && !plan.sampled) {
        stats.examined += plan.examined;
        stats.measuredOps++;
        stats.measuredReturned += returned;
      }
    }
    return stats;
  }

  /** A MongoDB command the driver reported (command monitoring). */
  command(name: string, ms: number, failed: boolean): void {
    const stats = this.commands.get(name);
    stats.count++;
    if (failed) stats.failures++;
    stats.time.record(ms);
  }

  /** Where the advisor learns a collection's indexes, and what they serve (the database registers itself). */
  listIndexesWith(lister: IndexLister, use: IndexUse = 'any'): void {
    this.lister = lister;
    this.indexUse = use;
  }

  async indexes(collection: string): Promise<IndexDescription[] | undefined> {
    if (!this.lister || collection === OTHER) return undefined;
    try {
      return await this.lister(collection);
    } catch {
      return undefined;
    }
  }
}
