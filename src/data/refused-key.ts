/**
 * Keys a MongoDB-wire store may refuse to store, at any depth: FerretDB and
 * MongoDB before 5.0 refuse a key that starts with `$` or holds a `.`, while
 * the embedded store and mongo-java-server keep it, so data that stores on one
 * fails on the other unless it is checked first.
 */
export function refusedKey(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || value instanceof Date || value instanceof Uint8Array) return undefined;
  for (const [key, inner] of Object.entries(value)) {
    if (!Array.isArray(value) && (key.startsWith('$') || key.includes('.'))) return key;
    const found = refusedKey(inner);
    if (found !== undefined) return found;
  }
  return undefined;
}
