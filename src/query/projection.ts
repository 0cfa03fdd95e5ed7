/**
 * Projections (`fields` / `projection`). Plain inclusion and exclusion, the only
 * kinds on the publication hot path, are compiled by hand into a path tree;
 * operator projections (`$slice`, `$elemMatch`, positional `$`) go to mingo.
 */
import type { Document, Projection } from './types.js';
import { mingoProject } from './mingo.js';

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

export function compileProjection(spec: Projection | undefined): Projector {
  if (spec === undefined || Object.keys(spec).length === 0) return IDENTITY;
  const entries = Object.entries(spec);
  if (entries.some(([path, v]) => isOperatorProjection(v) || path.includes('$'))) {
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
