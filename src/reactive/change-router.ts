/**
 * Which live queries of one collection a change event can concern, so that the
 * work per change does not grow with the number of live queries (10,000 users
 * each watching their own inbox: an insert reaches one query, not 10,000).
 *
 * A live query needs an event when the document is in its result now (the
 * change may take it out) or may be after it. Each query is filed under one
 * equality constraint of its selector (`{owner: u}`, `{_id: {$in: [...]}}`)
 * by value; every query is filed by the documents it holds. An event then goes to:
 * - the queries holding its document;
 * - with a whole document: the queries whose constraint value the document has;
 * - with only a modifier: those whose constraint the modifier sets to a known
 *   value, and, where it leaves the constraint's field alone, those reading a
 *   field it touches (the rule LiveQuery.couldEnter applies);
 * - with neither (a remove needs nothing more; an update by id alone): all;
 * - always: queries without a usable constraint (or re-run on every change),
 *   and queries still loading or busy, which queue events and decide later.
 * Queries get their events in the order they were created, as without the index.
 */
import { idStringify } from '../ddp/ids.js';
import type { Document } from '../data/types.js';
import type { ChangeEvent } from '../data/change-source.js';
import { isIndexableValue, selectorEqualities } from '../query/selector.js';
import type { LiveQuery } from './live-query.js';

interface FieldIndex {
  /** Queries by a value of their constraint on this field. */
  readonly byValue: Map<unknown, Set<LiveQuery>>;
  /** Queries filed under this field, by each field they read. */
  readonly readers: Map<string, Set<LiveQuery>>;
  readonly queries: Set<LiveQuery>;
}

interface Filing {
  readonly field: string;
  readonly values: unknown[];
  readonly reads: ReadonlySet<string>;
}

/** How a modifier leaves a field: untouched, set to these values, or changed in a way that cannot be told. */
type FieldEffect = { kind: 'untouched' } | { kind: 'set'; values: unknown[] } | { kind: 'unknown' };

function addTo<K, V>(map: Map<K, Set<V>>, key: K, value: V): void {
  let set = map.get(key);
  if (!set) map.set(key, (set = new Set()));
  set.add(value);
}

function deleteFrom<K, V>(map: Map<K, Set<V>>, key: K, value: V): void {
  const set = map.get(key);
  if (!set) return;
  set.delete(value);
  if (set.size === 0) map.delete(key);
}

/** The top-level fields a modifier writes, or 'all' when it is not a plain operator modifier. */
function touchedFields(modifier: Document): Set<string> | 'all' {
  const out = new Set<string>();
  for (const [op, args] of Object.entries(modifier)) {
    if (!op.startsWith('$') || typeof args !== 'object' || args === null) return 'all';
    for (const [path, value] of Object.entries(args as Document)) {
      out.add(path.split('.')[0]!);
      if (op === '$rename') out.add(String(value).split('.')[0]!);
    }
  }
  return out;
}

/** What `modifier` does to top-level `field`; only a `$set` of the field itself to plain values is "known". */
function effectOn(modifier: Document, field: string): FieldEffect {
  let effect: FieldEffect = { kind: 'untouched' };
  for (const [op, args] of Object.entries(modifier)) {
    for (const [path, value] of Object.entries(args as Document)) {
      const top = path.split('.')[0]!;
      const renamedTo = op === '$rename' ? String(value).split('.')[0] : undefined;
      if (top !== field && renamedTo !== field) continue;
      if (op !== '$set' || path !== field || effect.kind !== 'untouched') return { kind: 'unknown' };
      const values = Array.isArray(value) ? value : [value];
      if (!values.every(isIndexableValue)) return { kind: 'unknown' };
      effect = { kind: 'set', values };
    }
  }
  return effect;
}

/** Index keys of a document's field: its value, or each element of an array. */
function documentValues(value: unknown): unknown[] {
  if (isIndexableValue(value)) return [value];
  if (Array.isArray(value)) return value.filter(isIndexableValue);
  return [];
}

export class ChangeRouter {
  /** Every query, in creation order (what a resync, or routing turned off, reaches). */
  private readonly all = new Set<LiveQuery>();
  private readonly order = new Map<LiveQuery, number>();
  private created = 0;
  /** Queries every event goes to: no usable constraint, or re-run on any change. */
  private readonly unfiled = new Set<LiveQuery>();
  /** Queries loading or busy: they queue events and decide when they apply them. */
  private readonly catchingUp = new Set<LiveQuery>();
  private readonly holders = new Map<string, Set<LiveQuery>>();
  private readonly fields = new Map<string, FieldIndex>();
  private readonly filings = new Map<LiveQuery, Filing>();

  constructor(private readonly enabled = true) {}

  get size(): number {
    return this.all.size;
  }

  queries(): IterableIterator<LiveQuery> {
    return this.all.values();
  }

  /**
   * Files `query`; true when it is filed by a constraint, and must then report
   * what it holds and when it catches up (it starts out loading). An unfiled
   * query gets every event and reports nothing.
   */
  add(query: LiveQuery): boolean {
    const reads = query.reads;
    this.all.add(query);
    this.order.set(query, this.created++);
    const filing = query.strategy === 'requery' || reads === 'all' ? undefined : this.fileUnder(query, reads);
    if (!filing) {
      this.unfiled.add(query);
      return false;
    }
    this.catchingUp.add(query);
    this.filings.set(query, filing);
    let index = this.fields.get(filing.field);
    if (!index) this.fields.set(filing.field, (index = { byValue: new Map(), readers: new Map(), queries: new Set() }));
    index.queries.add(query);
    for (const value of filing.values) addTo(index.byValue, value, query);
    for (const field of filing.reads) addTo(index.readers, field, query);
    return true;
  }

  remove(query: LiveQuery, heldKeys: Iterable<string>): void {
    this.all.delete(query);
    this.order.delete(query);
    this.unfiled.delete(query);
    this.catchingUp.delete(query);
    const filing = this.filings.get(query);
    if (!filing) return;
    for (const key of heldKeys) deleteFrom(this.holders, key, query);
    this.filings.delete(query);
    const index = this.fields.get(filing.field)!;
    index.queries.delete(query);
    for (const value of filing.values) deleteFrom(index.byValue, value, query);
    for (const field of filing.reads) deleteFrom(index.readers, field, query);
    if (index.queries.size === 0) this.fields.delete(filing.field);
  }

  held(query: LiveQuery, key: string): void {
    if (this.filings.has(query)) addTo(this.holders, key, query); // a query removed meanwhile leaves nothing behind
  }

  released(query: LiveQuery, key: string): void {
    deleteFrom(this.holders, key, query);
  }

  setCatchingUp(query: LiveQuery, on: boolean): void {
    if (!this.all.has(query)) return;
    if (on) this.catchingUp.add(query);
    else this.catchingUp.delete(query);
  }

  /** The queries `event` can concern, in creation order. */
  route(event: ChangeEvent): Iterable<LiveQuery> {
    if (!this.enabled || event.op === 'resync') return this.all;
    if (event.op !== 'remove' && !event.doc && !event.modifier) return this.all; // nothing to go by without a read
    const out = new Set<LiveQuery>();
    const addAll = (set: Iterable<LiveQuery> | undefined) => {
      if (set) for (const query of set) out.add(query);
    };
    addAll(this.unfiled);
    addAll(this.catchingUp);
    let idKey: string;
    try {
      idKey = idStringify(event.id);
    } catch {
      return this.all;
    }
    addAll(this.holders.get(idKey));
    if (event.op !== 'remove') {
      if (event.doc) this.routeDocument(event.doc, idKey, addAll);
      else if (this.routeModifier(event.modifier!, idKey, addAll) === 'all') return this.all;
    }
    if (out.size < 2) return out;
    return [...out].sort((a, b) => this.order.get(a)! - this.order.get(b)!);
  }

  private routeDocument(doc: Document, idKey: string, addAll: (set: Iterable<LiveQuery> | undefined) => void): void {
    for (const [field, index] of this.fields) {
      if (field === '_id') addAll(index.byValue.get(idKey));
      else for (const value of documentValues(doc[field])) addAll(index.byValue.get(value));
    }
  }

  private routeModifier(modifier: Document, idKey: string, addAll: (set: Iterable<LiveQuery> | undefined) => void): 'all' | void {
    const touched = touchedFields(modifier);
    if (touched === 'all') return 'all';
    for (const [field, index] of this.fields) {
      if (field === '_id') {
        // An update cannot change `_id`: only the queries naming this document can take it in.
        addAll(index.byValue.get(idKey));
        continue;
      }
      const effect = effectOn(modifier, field);
      if (effect.kind === 'unknown') addAll(index.queries);
      else if (effect.kind === 'set') for (const value of effect.values) addAll(index.byValue.get(value));
      else for (const name of touched) addAll(index.readers.get(name));
    }
  }

  /** The constraint to file `query` under: `_id` if named, else the one with fewest values (ties: a field already in use). */
  private fileUnder(query: LiveQuery, reads: ReadonlySet<string>): Filing | undefined {
    const equalities = selectorEqualities(query.spec.selector);
    let best: Filing | undefined;
    for (const [field, values] of equalities) {
      let keys: unknown[];
      try {
        keys = field === '_id' ? values.map((id) => idStringify(id)) : values;
      } catch {
        continue; // an id the DDP layer cannot name cannot be a document's id either
      }
      const candidate: Filing = { field, values: keys, reads };
      if (!best || this.better(candidate, best)) best = candidate;
    }
    return best;
  }

  private better(a: Filing, b: Filing): boolean {
    if ((a.field === '_id') !== (b.field === '_id')) return a.field === '_id';
    if (a.values.length !== b.values.length) return a.values.length < b.values.length;
    const aUsed = this.fields.has(a.field);
    if (aUsed !== this.fields.has(b.field)) return aUsed;
    return a.field < b.field;
  }
}
