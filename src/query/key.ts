/**
 * Canonical key of a query: two cursors that select the same documents the same
 * way get the same key, so one live query serves both. Key order is ignored where
 * MongoDB ignores it (selector fields, operator objects, projections) and kept
 * where it matters (sort keys, literal sub-documents compared whole).
 */
import type { QuerySpec } from './types.js';
import { toJSONValue } from '../ddp/ejson.js';
import { isOperatorObject } from './values.js';

const LOGICAL = new Set(['$and', '$or', '$nor']);

function sortedObject(obj: Record<string, unknown>, mapValue: (key: string, value: unknown) => unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(obj).sort()) out[key] = mapValue(key, obj[key]);
  return out;
}

function canonicalCondition(value: unknown): unknown {
  if (!isOperatorObject(value)) return value;
  return sortedObject(value, (op, v) => {
    if (op === '$not' || op === '$elemMatch') return isOperatorObject(v) ? canonicalCondition(v) : canonicalSelector(v);
    return v;
  });
}

function canonicalSelector(selector: unknown): unknown {
  if (selector === null || typeof selector !== 'object' || Array.isArray(selector)) return selector;
  return sortedObject(selector as Record<string, unknown>, (key, value) => {
    if (LOGICAL.has(key) && Array.isArray(value)) return value.map(canonicalSelector);
    return canonicalCondition(value);
  });
}

export function queryKey(spec: QuerySpec): string {
  return JSON.stringify([
    spec.collection,
    toJSONValue(canonicalSelector(spec.selector)),
    spec.sort ?? null,
    spec.skip ?? 0,
    spec.limit ?? 0,
    spec.projection ? toJSONValue(sortedObject(spec.projection, (_k, v) => v)) : null,
  ]);
}
