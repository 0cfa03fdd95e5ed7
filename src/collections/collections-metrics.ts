/**
 * Database work as the APM sees it: every driver call of a database is timed
 * and counted per collection, operation and query shape (apm.database), with
 * the plan the driver reports (documents examined, index used) for the index
 * advisor. Inside a method (its write scope carries the trace) or a publish
 * function (the APM's own scope, metrics/trace-scope.ts) the call also
 * becomes a `db` part of the call's breakdown, an event of its timeline, and
 * an OpenTelemetry CLIENT span under the call's span.
 * A wrapper, so neither driver knows the APM and live queries are counted
 * too (they read through the same driver).
 */
import { apm } from '../metrics/apm.js';
import type { DbOperation } from '../metrics/database-stats.js';
import { endDbSpan, startDbSpan } from '../metrics/otel.js';
import { queryShape, type QueryShape } from '../metrics/query-shape.js';
import { currentTrace } from '../metrics/trace-scope.js';
import { currentWriteScope } from '../reactive/write-scope.js';
import type { CollectionDriver, QueryPlan, QueryResult, StorageDriver } from '../data/driver.js';
import type { Document, QuerySpec } from '../data/types.js';

/** Live queries re-run the same spec object: its shape is computed once. */
const shapes = new WeakMap<object, QueryShape>();

function shapeOf(selector: Document, spec?: QuerySpec): QueryShape {
  const holder = spec ?? selector;
  let shape = shapes.get(holder);
  if (!shape) shapes.set(holder, (shape = queryShape(selector, spec?.sort)));
  return shape;
}

function docsOf(op: DbOperation, result: unknown): number | undefined {
  if (op === 'find') return (result as QueryResult).docs.length;
  if (op === 'count') return result as number;
  if (op === 'insert') return 1;
  if (op === 'update') return (result as { numberAffected: number }).numberAffected;
  return (result as { removed: number }).removed;
}

async function timed<R>(
  system: string,
  collection: string,
  op: DbOperation,
  shape: QueryShape | undefined,
  run: () => Promise<R>,
  explain?: () => Promise<QueryPlan | undefined>,
): Promise<R> {
  if (!apm.enabled) return run();
  const trace = currentWriteScope()?.trace ?? currentTrace();
  const started = performance.now();
  const traceStart = trace?.dbStarted();
  const span = startDbSpan(trace?.span, system, collection, op, shape?.key);
  let result: R;
  try {
    result = await run();
  } catch (error) {
    const ms = performance.now() - started;
    apm.database.record(collection, op, shape, ms, undefined, undefined, true);
    if (trace) trace.dbEnded(traceStart!, collection, op, shape?.key, undefined, error instanceof Error ? error.message : String(error));
    endDbSpan(span, undefined, error);
    throw error;
  }
  const ms = performance.now() - started;
  const docs = docsOf(op, result);
  const plan: QueryPlan | undefined = op === 'find' ? (result as QueryResult).plan : undefined;
  const stats = apm.database.record(collection, op, shape, ms, docs, plan, false);
  if (explain && stats && stats.ops === 1 && !plan) void explain().then((sampled) => sampled && !stats.plan && (stats.plan = sampled));
  if (trace) trace.dbEnded(traceStart!, collection, op, shape?.key, docs);
  endDbSpan(span, docs, undefined);
  return result;
}

function instrumentCollection(system: string, driver: CollectionDriver): CollectionDriver {
  const name = driver.name;
  return {
    name,
    insert: (doc) => timed(system, name, 'insert', undefined, () => driver.insert(doc)),
    update: (selector, modifier, options) => timed(system, name, 'update', shapeOf(selector), () => driver.update(selector, modifier, options)),
    remove: (selector) => timed(system, name, 'remove', shapeOf(selector), () => driver.remove(selector)),
    find: (query) => timed(system, name, 'find', shapeOf(query.selector, query), () => driver.find(query), driver.explain && (() => driver.explain!(query))),
    count: (query) => timed(system, name, 'count', shapeOf(query.selector, query), () => driver.count(query)),
    createIndex: (keys, options) => driver.createIndex(keys, options),
    dropIndex: (index) => driver.dropIndex(index),
    listIndexes: () => driver.listIndexes(),
    explain: driver.explain && ((query) => driver.explain!(query)),
    drop: () => driver.drop(),
  };
}

/** `driver` with every collection's calls recorded; its index lists feed the advisor. */
export function instrumentDriver(driver: StorageDriver): StorageDriver {
  const system = driver.kind === 'mongo' ? 'mongodb' : 'perseid-embedded';
  const collections = new Map<string, CollectionDriver>();
  const collection = (name: string): CollectionDriver => {
    let c = collections.get(name);
    if (!c) collections.set(name, (c = instrumentCollection(system, driver.collection(name))));
    return c;
  };
  apm.database.listIndexesWith((name) => driver.collection(name).listIndexes(), driver.kind === 'mongo' ? 'any' : 'first-field-equality');
  // A proxy, so whatever else a driver offers (and `instanceof`) stays as it is.
  return new Proxy(driver, {
    get(target, property) {
      if (property === 'collection') return collection;
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
