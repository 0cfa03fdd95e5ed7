/**
 * Secondary indexes with MongoDB's key rules: a missing field is keyed as null,
 * an array field is multikey (one key per element), a compound key is the tuple
 * of its fields' values, and a sparse index skips documents that have none of
 * its fields. Keys are canonical EJSON text, so values EJSON considers equal
 * (Dates, ObjectIDs, binaries, sub-documents) share a key.
 */
import { EJSON } from '../../ddp/ejson.js';
import { DuplicateKeyError } from '../driver.js';
import type { Document, IndexKeys, IndexOptions } from '../types.js';
import { isOperatorObject, isPlainObject } from '../../query/values.js';

export interface IndexSpec {
  readonly name: string;
  readonly keys: IndexKeys;
  readonly unique: boolean;
  readonly sparse: boolean;
}

/** The implicit unique index on `_id` (kept by the collection's id map, not here). */
export const ID_INDEX = '_id_';

export function indexSpec(keys: IndexKeys, options: IndexOptions = {}): IndexSpec {
  const entries = Object.entries(keys);
  if (entries.length === 0) throw new Error('An index needs at least one key');
  for (const [path, direction] of entries) {
    if (path === '' || path.startsWith('$')) throw new Error(`Invalid index key ${JSON.stringify(path)}`);
    if (direction !== 1 && direction !== -1) {
      throw new Error(`Invalid direction for index key ${path}: ${JSON.stringify(direction)} (1 or -1)`);
    }
  }
  return {
    name: options.name ?? entries.map(([path, direction]) => `${path}_${direction}`).join('_'),
    keys: { ...keys },
    unique: options.unique ?? false,
    sparse: options.sparse ?? false,
  };
}

function keysText(keys: IndexKeys): string {
  return JSON.stringify(Object.entries(keys));
}

export function sameIndex(a: IndexSpec, b: IndexSpec): boolean {
  return a.name === b.name && a.unique === b.unique && a.sparse === b.sparse && keysText(a.keys) === keysText(b.keys);
}

/** Every value `parts` reaches in `value`, descending into arrays; `undefined` stands for a missing field. */
function pathValues(value: unknown, parts: readonly string[], i: number, out: unknown[]): void {
  if (i === parts.length) {
    if (Array.isArray(value) && value.length > 0) out.push(...(value as unknown[]));
    else out.push(value);
    return;
  }
  const part = parts[i]!;
  if (Array.isArray(value)) {
    const before = out.length;
    if (/^\d+$/.test(part)) pathValues(value[Number(part)], parts, i + 1, out);
    for (const element of value) if (isPlainObject(element)) pathValues(element, parts, i, out);
    if (out.length === before) out.push(undefined);
    return;
  }
  pathValues(isPlainObject(value) ? value[part] : undefined, parts, i + 1, out);
}

function valueKey(value: unknown): string {
  return EJSON.stringify(value === undefined ? null : value, { canonical: true });
}

/** Whether an equality value can be looked up by key: scalars and literal sub-documents, not null (sparse). */
function isLookupValue(value: unknown): boolean {
  return value !== undefined && value !== null && !Array.isArray(value) && !(value instanceof RegExp) && !isOperatorObject(value);
}

export class Index {
  private readonly entries = new Map<string, Set<string>>();
  /** A compound index's ids by its first field's key, so an equality on that field alone is a lookup too (a prefix, as in MongoDB). */
  private readonly byFirst: Map<string, Set<string>> | undefined;
  private readonly paths: string[][];
  readonly fields: string[];

  constructor(readonly spec: IndexSpec) {
    this.fields = Object.keys(spec.keys);
    this.paths = this.fields.map((field) => field.split('.'));
    if (this.fields.length > 1) this.byFirst = new Map();
  }

  private firstKeys(doc: Document): Set<string> {
    const values: unknown[] = [];
    pathValues(doc, this.paths[0]!, 0, values);
    return new Set(values.map(valueKey));
  }

  /** The keys a document is indexed under: none when a sparse index has none of its fields. */
  keysOf(doc: Document): Set<string> {
    const perField = this.paths.map((parts) => {
      const values: unknown[] = [];
      pathValues(doc, parts, 0, values);
      return values;
    });
    if (this.spec.sparse && perField.every((values) => values.every((v) => v === undefined))) return new Set();
    if (perField.length === 1) return new Set(perField[0]!.map(valueKey));
    let tuples: unknown[][] = [[]];
    for (const values of perField) {
      tuples = tuples.flatMap((tuple) => values.map((v) => [...tuple, v === undefined ? null : v]));
    }
    return new Set(tuples.map(valueKey));
  }

  add(id: string, doc: Document): void {
    const keys = this.keysOf(doc);
    for (const key of keys) addTo(this.entries, key, id);
    if (this.byFirst && keys.size > 0) for (const key of this.firstKeys(doc)) addTo(this.byFirst, key, id);
  }

  remove(id: string, doc: Document): void {
    for (const key of this.keysOf(doc)) removeFrom(this.entries, key, id);
    if (this.byFirst) for (const key of this.firstKeys(doc)) removeFrom(this.byFirst, key, id);
  }

  holders(key: string): ReadonlySet<string> | undefined {
    return this.entries.get(key);
  }

  /** The ids whose first indexed field has `key` (a single-field index's holders). */
  prefixHolders(key: string): ReadonlySet<string> | undefined {
    return (this.byFirst ?? this.entries).get(key);
  }

  /** The key as a document (`{a: 1, b: 'x'}`), for error messages. */
  keyDocument(key: string): Document {
    const parsed = EJSON.parse(key);
    const values = this.fields.length === 1 ? [parsed] : (parsed as unknown[]);
    return Object.fromEntries(this.fields.map((field, i) => [field, values[i]]));
  }
}

function addTo(map: Map<string, Set<string>>, key: string, id: string): void {
  let ids = map.get(key);
  if (!ids) map.set(key, (ids = new Set()));
  ids.add(id);
}

function removeFrom(map: Map<string, Set<string>>, key: string, id: string): void {
  const ids = map.get(key);
  ids?.delete(id);
  if (ids?.size === 0) map.delete(key);
}

const NONE: ReadonlySet<string> = new Set();

export interface IndexedChange {
  /** The document's id key (`idStringify(_id)`). */
  id: string;
  doc: Document;
}

/** A collection's secondary indexes. */
export class IndexSet {
  private readonly byName = new Map<string, Index>();

  constructor(private readonly collection: string) {}

  get size(): number {
    return this.byName.size;
  }

  get(name: string): Index | undefined {
    return this.byName.get(name);
  }

  specs(): IndexSpec[] {
    return [...this.byName.values()].map((index) => index.spec);
  }

  withKeys(keys: IndexKeys): Index | undefined {
    const text = keysText(keys);
    for (const index of this.byName.values()) if (keysText(index.spec.keys) === text) return index;
    return undefined;
  }

  /** Builds an index over `docs`; a unique index over duplicate keys throws and is not built. */
  build(spec: IndexSpec, docs: Iterable<[string, Document]>): Index {
    const index = new Index(spec);
    for (const [id, doc] of docs) {
      if (spec.unique) {
        for (const key of index.keysOf(doc)) {
          if (index.holders(key)?.size) throw new DuplicateKeyError(this.collection, spec.name, index.keyDocument(key), spec.keys);
        }
      }
      index.add(id, doc);
    }
    return index;
  }

  install(index: Index): void {
    this.byName.set(index.spec.name, index);
  }

  drop(name: string): boolean {
    return this.byName.delete(name);
  }

  clear(): void {
    this.byName.clear();
  }

  /** Re-keys a document: `old` is its stored version (if any), `doc` its new one (none when removed). */
  replace(id: string, old: Document | undefined, doc: Document | undefined): void {
    for (const index of this.byName.values()) {
      if (old) index.remove(id, old);
      if (doc) index.add(id, doc);
    }
  }

  /**
   * Throws DuplicateKeyError when storing all of `changes` (new documents or new
   * versions) would give two documents the same key of a unique index. A key
   * held by a document the batch itself replaces does not count: its new
   * version's keys are checked instead.
   */
  check(changes: readonly IndexedChange[]): void {
    const changing = new Set(changes.map((change) => change.id));
    for (const index of this.byName.values()) {
      if (!index.spec.unique) continue;
      const claimed = new Map<string, string>();
      for (const { id, doc } of changes) {
        for (const key of index.keysOf(doc)) {
          const other = claimed.get(key);
          let taken = other !== undefined && other !== id;
          for (const holder of index.holders(key) ?? NONE) if (holder !== id && !changing.has(holder)) taken = true;
          if (taken) throw new DuplicateKeyError(this.collection, index.spec.name, index.keyDocument(key), index.spec.keys);
          claimed.set(key, id);
        }
      }
    }
  }

  /** The ids of documents whose single-field index on `field` holds `value`; undefined when no index applies. */
  /** The ids an index holds for `field` equal to `value`: a single-field index's, else a compound one's that starts with the field; undefined when none serves. */
  lookup(field: string, value: unknown): { ids: ReadonlySet<string>; index: string } | undefined {
    if (!isLookupValue(value)) return undefined;
    let prefix: Index | undefined;
    for (const index of this.byName.values()) {
      if (index.fields[0] !== field) continue;
      if (index.fields.length === 1) return { ids: index.holders(valueKey(value)) ?? NONE, index: index.spec.name };
      prefix ??= index;
    }
    return prefix ? { ids: prefix.prefixHolders(valueKey(value)) ?? NONE, index: prefix.spec.name } : undefined;
  }
}
