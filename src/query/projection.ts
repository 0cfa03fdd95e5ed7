/**
 * Projections (`fields` / `projection`). Plain inclusion and exclusion, the only
 * kinds on the publication hot path, are compiled by hand into a path tree;
 * operator projections (`$slice`, `$elemMatch`, positional `$`) go to mingo.
 */
import type { Document, Projection } from './types.js';
import { mingoProject } from './mingo.js';
import { isPlainObject } from './values.js';

type PathTree = { [key: string]: PathTree | true };

export interface Projector {
  /** Returns a new top-level object; nested values are shared with the input. */
  apply(doc: Document): Document;
  /** Top-level fields a document needs for this projection to be computed. */
  readonly topLevelFields: ReadonlySet<string> | 'all';
}

/**
 * A projection that keeps what `spec` keeps and the top-level `fields` too
 * (undefined: the whole document). A live query reads with it: it tests its
 * selector and sort on the documents it holds, whatever it publishes of them.
 */
export function widenProjection(spec: Projection | undefined, fields: ReadonlySet<string> | 'all'): Projection | undefined {
  if (spec === undefined || fields === 'all') return undefined;
  const kept = compileProjection(spec).topLevelFields;
  if (kept !== 'all') return Object.fromEntries([...kept, ...fields].map((field) => [field, 1]));
  // An exclusion (or an operator projection): still leave out what no read field is part of.
  const excluded = Object.entries(spec).filter(([path, v]) => (v === 0 || v === false) && path !== '_id' && !fields.has(path.split('.')[0]!));
  return excluded.length > 0 ? Object.fromEntries(excluded) : undefined;
}

const IDENTITY: Projector = { apply: (doc) => ({ ...doc }), topLevelFields: 'all' };

function isOperatorProjection(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !(value instanceof Date);
}

function addPath(tree: PathTree, path: string): void {
  const parts = path.split('.');
  let node = tree;
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    if (i === parts.length - 1) {
      node[part] = true;
    } else {
      const next = node[part];
      if (next === true) return; // a parent is already wholly selected
      node = node[part] = next ?? {};
    }
  }
}

function include(value: unknown, tree: PathTree): unknown {
  if (Array.isArray(value)) {
    return value.filter((v) => typeof v === 'object' && v !== null && !Array.isArray(v)).map((v) => include(v, tree));
  }
  const doc = value as Document;
  const out: Document = {};
  for (const key in tree) {
    if (!(key in doc)) continue;
    const sub = tree[key]!;
    if (sub === true) out[key] = doc[key];
    else {
      const child = doc[key];
      if (typeof child === 'object' && child !== null && !(child instanceof Date)) out[key] = include(child, sub);
    }
  }
  return out;
}

function exclude(value: unknown, tree: PathTree): unknown {
  if (Array.isArray(value)) return value.map((v) => exclude(v, tree));
  if (typeof value !== 'object' || value === null || value instanceof Date) return value;
  const out: Document = { ...(value as Document) };
  for (const key in tree) {
    if (!(key in out)) continue;
    const sub = tree[key]!;
    if (sub === true) delete out[key];
    else out[key] = exclude(out[key], sub);
  }
  return out;
}

type SliceArg = number | [number, number];

/** The elements `$slice: arg` keeps of `list`: the first n, the last -n, or [skip, count] (a negative skip counts from the end). */
function sliced(list: unknown[], arg: SliceArg): unknown[] {
  if (typeof arg === 'number') return arg < 0 ? list.slice(arg) : list.slice(0, arg);
  return list.slice(arg[0]).slice(0, arg[1]);
}

function isSliceArg(arg: unknown): arg is SliceArg {
  return Number.isInteger(arg) || (Array.isArray(arg) && arg.length === 2 && arg.every(Number.isInteger) && arg[1] > 0);
}

/** `value` with the arrays at `parts` sliced (through arrays of sub-documents too); anything else is left as it is. */
function sliceAt(value: unknown, parts: readonly string[], arg: SliceArg): unknown {
  if (parts.length === 0) return Array.isArray(value) ? sliced(value, arg) : value;
  if (Array.isArray(value)) return value.map((v) => sliceAt(v, parts, arg));
  if (!isPlainObject(value) || !(parts[0]! in value)) return value;
  return { ...value, [parts[0]!]: sliceAt(value[parts[0]!], parts.slice(1), arg) };
}

/**
 * A projection of `$slice`s and exclusions only: MongoDB keeps every other field
 * (`{comments: {$slice: -5}}` is the whole document with its last five
 * comments), where mingo kept only the sliced fields, or refused exclusions.
 */
function compileSliceExclusion(entries: Array<[string, unknown]>): Projector | undefined {
  const slices: Array<[string[], SliceArg]> = [];
  const excluded: Projection = {};
  for (const [path, v] of entries) {
    if (v === 0 || v === false) excluded[path] = v;
    else if (isOperatorProjection(v) && Object.keys(v as object).join() === '$slice' && isSliceArg((v as { $slice: unknown }).$slice)) {
      slices.push([path.split('.'), (v as { $slice: SliceArg }).$slice]);
    } else return undefined; // mingo's: it also says what is wrong with a bad one
  }
  if (slices.length === 0) return undefined;
  const rest = Object.keys(excluded).length > 0 ? compileProjection(excluded) : IDENTITY;
  return {
    apply: (doc) => slices.reduce<Document>((out, [parts, arg]) => sliceAt(out, parts, arg) as Document, rest.apply(doc)),
    topLevelFields: 'all',
  };
}

export function compileProjection(spec: Projection | undefined): Projector {
  if (spec === undefined || Object.keys(spec).length === 0) return IDENTITY;
  const entries = Object.entries(spec);
  if (entries.some(([path, v]) => isOperatorProjection(v) || path.includes('$'))) {
    const sliceExclusion = compileSliceExclusion(entries);
    if (sliceExclusion) return sliceExclusion;
    try {
      mingoProject({}, spec);
    } catch (error) {
      throw new Error(`Invalid projection ${JSON.stringify(spec)}: ${(error as Error).message}`, { cause: error });
    }
    return {
      apply: (doc) => mingoProject(doc, spec),
      topLevelFields: 'all',
    };
  }
  let idSetting: boolean | undefined;
  let mode: 'include' | 'exclude' | undefined;
  const tree: PathTree = {};
  for (const [path, v] of entries) {
    const on = v === 1 || v === true;
    if (!on && v !== 0 && v !== false) throw new Error(`Invalid projection value for ${path}: ${JSON.stringify(v)}`);
    if (path === '_id') {
      idSetting = on;
      continue;
    }
    const m = on ? 'include' : 'exclude';
    if (mode !== undefined && mode !== m) throw new Error('Projection cannot mix including and excluding fields');
    mode = m;
    addPath(tree, path);
  }
  if (mode === undefined) mode = idSetting === false ? 'exclude' : 'include';
  if (mode === 'include') {
    if (idSetting !== false) tree._id = true;
    const top = new Set(Object.keys(tree));
    return { apply: (doc) => include(doc, tree) as Document, topLevelFields: top };
  }
  if (idSetting === false) tree._id = true;
  return { apply: (doc) => exclude(doc, tree) as Document, topLevelFields: 'all' };
}
