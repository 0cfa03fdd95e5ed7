/** Value classifications shared by query, update and index code. */

/** A plain object (a sub-document), as opposed to an array, a Date, a binary or an ObjectID. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** An object whose keys are query or update operators (`{$gt: 1}`), not a literal sub-document. */
export function isOperatorObject(value: unknown): value is Record<string, unknown> {
  if (!isPlainObject(value)) return false;
  const first = Object.keys(value)[0];
  return first !== undefined && first.startsWith('$');
}
