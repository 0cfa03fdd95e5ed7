/**
 * How deeply a JSON text nests, read from the text before it is parsed, so a
 * message built to exhaust the stack (thousands of `[` or `{`) is refused
 * before any recursive code (EJSON decoding, echoing, app code) sees it.
 */

const QUOTE = 34; // "
const BACKSLASH = 92; // \
const OPEN_ARRAY = 91; // [
const OPEN_OBJECT = 123; // {
const CLOSE_ARRAY = 93; // ]
const CLOSE_OBJECT = 125; // }

/** True when arrays and objects in `text` nest more than `limit` deep (brackets inside strings do not count). */
export function nestsDeeperThan(text: string, limit: number): boolean {
  // A text shorter than the limit cannot open more brackets than it has characters.
  if (text.length <= limit) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > limit) return true;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
    }
  }
  return false;
}
