/**
 * The index advisor: from the query shapes the server ran and the documents
 * each examined for every document it returned, one index per scanning shape,
 * ordered by the equality-sort-range rule (MongoDB's ESR guideline: fields
 * tested for equality, then `$in`, then the sort, then ranges), written as
 * the exact `createIndexAsync` line to run, with what the shape costs now.
 * An advised index that a longer advised or existing one starts with is not
 * advised; an existing index that a longer one starts with is advised for
 * dropping (unless it is unique or TTL: it enforces or deletes something; and
 * a sparse or partial index is never the longer one, it serves only some
 * queries). A shape whose plan is
 * unknown (a MongoDB-wire server without explain) is judged from the indexes
 * the collection has, and its advice says it was inferred. Only indexes the
 * database would use are advised: on the embedded store, which uses an index
 * for an equality on its first field, only for shapes with an equality that no
 * index starts with yet.
 */
import type { FieldKind, QueryShape } from './query-shape.js';
import type { IndexDescription, IndexUse, QueryPlan } from './database-stats.js';

export type IndexKeys = Record<string, 1 | -1>;

/** A shape's figures, as the APM reports them. */
export interface ShapeFigures {
  collection: string;
  shape: QueryShape;
  ops: number;
  timeMs: number;
  slow: number;
  returned: number;
  examined: number;
  measuredOps: number;
  measuredReturned: number;
  plan?: QueryPlan;
  firstAt: number;
  lastAt: number;
}

/** Figures of the same shape from several processes (a primary's workers) as one, per collection and shape: sums, the span, the latest plan. */
export function mergeShapes(shapes: readonly ShapeFigures[]): ShapeFigures[] {
  const merged = new Map<string, ShapeFigures>();
  for (const s of shapes) {
    const key = `${s.collection}\u0000${s.shape.key}`;
    const row = merged.get(key);
    if (!row) {
      merged.set(key, { ...s });
      continue;
    }
    row.ops += s.ops;
    row.timeMs += s.timeMs;
    row.slow += s.slow;
    row.returned += s.returned;
    row.examined += s.examined;
    row.measuredOps += s.measuredOps;
    row.measuredReturned += s.measuredReturned;
    row.firstAt = Math.min(row.firstAt, s.firstAt);
    if (s.lastAt > row.lastAt) {
      row.lastAt = s.lastAt;
      if (s.plan) row.plan = s.plan;
    }
  }
  return [...merged.values()];
}

export interface IndexAdvice {
  action: 'create' | 'drop';
  collection: string;
  /** The index to create, or the one to drop. */
  index: IndexKeys;
  /** The existing index's name (drop advice). */
  name?: string;
  /** The line to run. */
  line: string;
  reason: string;
  /** The shapes the index would serve (create advice). */
  shapes: string[];
  cost?: AdviceCost;
  /** The index that makes this one redundant (drop advice). */
  coveredBy?: IndexKeys;
}

export interface AdviceCost {
  ops: number;
  /** Null (with the two below) when no operation's plan counted them: a plan without counts, or none. */
  docsExamined: number | null;
  docsReturned: number;
  examinedPerReturned: number | null;
  /** From the shape's first operation to the report, so a burst long past does not read as a steady rate. */
  docsExaminedPerSecond: number | null;
  timeMs: number;
  avgMs: number;
  /** No plan was known: judged from the collection's indexes. */
  inferred: boolean;
}

export interface AdvisorOptions {
  /** A shape scans when its operations examine at least this many more documents than they return, on average. */
  minWastePerOp: number;
  /** ... and at least this many documents per document returned. */
  minRatio: number;
}

export const DEFAULT_ADVISOR_OPTIONS: AdvisorOptions = { minWastePerOp: 100, minRatio: 4 };

const RANGE_KINDS: FieldKind[] = ['range', 'regex', 'type', 'exists', 'array'];

/** The index ESR orders for `shape`: equality, `$in`, sort, range; nothing for shapes no index helps. */
export function esrIndex(shape: QueryShape): IndexKeys {
  const keys: IndexKeys = {};
  const byKind = (kinds: FieldKind[]) => shape.fields.filter(([, kind]) => kinds.includes(kind)).map(([field]) => field);
  for (const field of byKind(['eq'])) keys[field] = 1;
  for (const field of byKind(['in'])) keys[field] ??= 1;
  for (const [field, direction] of shape.sort) keys[field] ??= direction;
  for (const field of byKind(RANGE_KINDS)) keys[field] ??= 1;
  return keys;
}

/** Whether `a`'s keys begin `b`'s, in order and direction (or all reversed: an index serves both ways). */
export function isPrefix(a: IndexKeys, b: Record<string, number>): boolean {
  const left = Object.entries(a);
  const right = Object.entries(b);
  if (left.length > right.length || left.length === 0) return false;
  const same = left.every(([field, dir], i) => right[i]![0] === field && right[i]![1] === dir);
  const reversed = left.every(([field, dir], i) => right[i]![0] === field && right[i]![1] === -dir);
  return same || reversed;
}

function keyText(field: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(field) ? field : `'${field.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

export function indexText(keys: Record<string, number>): string {
  return `{ ${Object.entries(keys).map(([field, dir]) => `${keyText(field)}: ${dir}`).join(', ')} }`;
}

function collectionText(name: string): string {
  return `new Collection('${name.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}')`;
}

/** Whether the shape's operations examine many more documents than they return; undefined when nothing says. */
function scans(figures: ShapeFigures, options: AdvisorOptions): boolean | undefined {
  let examined: number;
  let returned: number;
  if (figures.measuredOps > 0) {
    examined = figures.examined / figures.measuredOps;
    returned = figures.measuredReturned / figures.measuredOps;
  } else if (figures.plan?.examined !== undefined) {
    examined = figures.plan.examined;
    returned = figures.plan.returned ?? 0;
  } else if (figures.plan?.stage === 'COLLSCAN') return true; // a plan without counts (FerretDB's) still says it reads every document
  else return undefined;
  return examined - returned >= options.minWastePerOp && examined >= options.minRatio * Math.max(1, returned);
}

/** With no plan: whether no index of the collection starts with a field the shape tests or sorts by. */
function inferredScan(shape: QueryShape, indexes: IndexDescription[]): boolean {
  const useful = new Set([...shape.fields.filter(([, kind]) => kind !== 'ne' && kind !== 'other').map(([field]) => field), ...shape.sort.map(([field]) => field)]);
  if (useful.size === 0) return false;
  return !indexes.some((index) => useful.has(Object.keys(index.keys)[0]!));
}

function costOf(list: ShapeFigures[], inferred: boolean, now: number): AdviceCost {
  let ops = 0;
  let timeMs = 0;
  let examined = 0;
  let returned = 0;
  let first = Infinity;
  let last = 0;
  let counted = false;
  for (const f of list) {
    ops += f.ops;
    timeMs += f.timeMs;
    first = Math.min(first, f.firstAt);
    last = Math.max(last, f.lastAt);
    if (f.measuredOps > 0) {
      counted = true;
      // Scaled to every operation of the shape, measured or not.
      examined += (f.examined / f.measuredOps) * f.ops;
      returned += (f.measuredReturned / f.measuredOps) * f.ops;
    } else if (f.plan?.examined !== undefined) {
      counted = true;
      examined += f.plan.examined * f.ops;
      returned += (f.plan.returned ?? 0) * f.ops;
    } else returned += f.returned;
  }
  const seconds = Math.max(1, (Math.max(now, last) - first) / 1000);
  return {
    ops,
    docsExamined: counted ? Math.round(examined) : null,
    docsReturned: Math.round(returned),
    examinedPerReturned: counted ? (returned > 0 ? examined / returned : examined) : null,
    docsExaminedPerSecond: counted ? examined / seconds : null,
    timeMs,
    avgMs: ops > 0 ? timeMs / ops : 0,
    inferred,
  };
}

export function adviseIndexes(
  shapes: readonly ShapeFigures[],
  indexes: Readonly<Record<string, IndexDescription[] | undefined>>,
  options: AdvisorOptions = DEFAULT_ADVISOR_OPTIONS,
  use: IndexUse = 'any',
  /** When the figures were taken (ms since the epoch, the server's clock). */
  now = Date.now(),
): IndexAdvice[] {
  const wanted = new Map<string, { collection: string; index: IndexKeys; shapes: ShapeFigures[]; inferred: boolean }>();
  for (const figures of shapes) {
    const { shape, collection } = figures;
    if (shape.byId || shape.unindexable) continue;
    const existing = indexes[collection] ?? [];
    let scanning = scans(figures, options);
    let inferred = false;
    if (scanning === undefined) {
      scanning = inferredScan(shape, existing);
      inferred = true;
    }
    if (!scanning) continue;
    const index = esrIndex(shape);
    if (Object.keys(index).length === 0) continue;
    if (existing.some((e) => isPrefix(index, e.keys))) continue;
    if (use === 'first-field-equality') {
      // An index there serves only an equality on its first field: none helps a shape without one, and
      // once an index starts with one of its equality fields, a longer one reads the same documents.
      const equalities = shape.fields.filter(([, kind]) => kind === 'eq').map(([field]) => field);
      if (equalities.length === 0 || existing.some((e) => equalities.includes(Object.keys(e.keys)[0]!))) continue;
    }
    const key = `${collection}\u0000${JSON.stringify(index)}`;
    const entry = wanted.get(key) ?? { collection, index, shapes: [], inferred };
    entry.shapes.push(figures);
    entry.inferred &&= inferred;
    wanted.set(key, entry);
  }
  // An advised index that a longer advised one starts with: the longer serves its shapes too.
  const entries = [...wanted.values()];
  const kept = entries.filter((entry) => {
    const longer = entries.find((other) => other !== entry && other.collection === entry.collection && Object.keys(other.index).length > Object.keys(entry.index).length && isPrefix(entry.index, other.index));
    if (longer) longer.shapes.push(...entry.shapes);
    return !longer;
  });
  const advice: IndexAdvice[] = kept.map((entry) => {
    const cost = costOf(entry.shapes, entry.inferred, now);
    const reason = entry.inferred
      ? `no index of ${entry.collection} starts with a field these queries test (the database gave no plan: inferred)`
      : cost.examinedPerReturned !== null
        ? `these queries examine ${cost.examinedPerReturned.toFixed(1)} documents per document returned`
        : 'the database\'s plan for these queries reads the whole collection';
    return {
      action: 'create',
      collection: entry.collection,
      index: entry.index,
      line: `await ${collectionText(entry.collection)}.createIndexAsync(${indexText(entry.index)});`,
      reason,
      shapes: entry.shapes.map((s) => s.shape.key),
      cost,
    };
  });
  advice.sort((a, b) => Number(a.cost!.inferred) - Number(b.cost!.inferred) || (b.cost!.docsExaminedPerSecond ?? 0) - (a.cost!.docsExaminedPerSecond ?? 0) || b.cost!.timeMs - a.cost!.timeMs);
  // Existing indexes a longer existing or advised index starts with: not one that enforces or deletes
  // something (unique, TTL), and not in favour of one that holds only some documents (sparse, partial).
  for (const [collection, list] of Object.entries(indexes)) {
    for (const index of list ?? []) {
      if (index.name === '_id_' || index.unique || index.expires) continue;
      const keys = index.keys as IndexKeys;
      const longer = [...(list ?? []).filter((i) => !i.partial).map((i) => i.keys as IndexKeys), ...kept.filter((e) => e.collection === collection).map((e) => e.index)].find(
        (other) => Object.keys(other).length > Object.keys(keys).length && isPrefix(keys, other),
      );
      if (!longer) continue;
      advice.push({
        action: 'drop',
        collection,
        index: keys,
        name: index.name,
        line: `await ${collectionText(collection)}.dropIndexAsync('${index.name.replace(/'/g, "\\'")}');`,
        reason: `${indexText(longer)} starts with the same keys and serves the same queries`,
        shapes: [],
        coveredBy: longer,
      });
    }
  }
  return advice;
}
