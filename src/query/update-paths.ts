/**
 * MongoDB's checks on the paths an update's operators name, which mingo does
 * not make: no empty part (`''`, `'a..b'`, `'a.'`, a `$rename` to `''`) and no
 * `$`-prefixed part but the positional ones (`$`, `$[]`, `$[name]`). mingo
 * stored `{'': 1}` or `{a: {'': {b: 1}}}`, which MongoDB refuses. Server side
 * only: the browser bundle has no room, and the server's answer decides.
 */
import type { Document } from './types.js';
import { isPlainObject } from './values.js';

const POSITIONAL = /^\$(\[\w*\])?$/;

function assertUpdatePath(path: string): void {
  if (path === '') throw new Error('An empty update path is not valid.');
  for (const part of path.split('.')) {
    if (part === '') throw new Error(`The update path '${path}' contains an empty field name, which is not allowed.`);
    if (part.startsWith('$') && !POSITIONAL.test(part)) throw new Error(`The dollar ($) prefixed field '${part}' in '${path}' is not valid for storage.`);
  }
}

/** Throws for the first path of `modifier` MongoDB would refuse; a replacement document has none. */
export function assertUpdatePaths(modifier: Document): void {
  for (const [op, args] of Object.entries(modifier)) {
    if (!op.startsWith('$') || !isPlainObject(args)) continue;
    for (const [path, arg] of Object.entries(args)) {
      assertUpdatePath(path);
      if (op === '$rename' && typeof arg === 'string') assertUpdatePath(arg);
    }
  }
}
