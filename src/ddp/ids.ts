/**
 * Meteor's rule for turning a document `_id` into the DDP `id` string and back
 * (`packages/mongo-id`), so that non-string ids survive the trip unchanged.
 */
import { ObjectID } from './object-id.js';

export type DocumentId = string | number | boolean | null | ObjectID;

function looksLikeObjectID(text: string): boolean {
  return text.length === 24 && /^[0-9a-f]*$/.test(text);
}

export function idStringify(id: unknown): string {
  if (typeof id === 'string') {
    if (id === '') return id;
    const first = id.charCodeAt(0);
    // '-', '~', '{' or an ObjectID look-alike would be ambiguous, so they are escaped.
    if (first === 45 || first === 126 || first === 123 || looksLikeObjectID(id)) return `-${id}`;
    return id;
  }
  if (id instanceof ObjectID) return id.toHexString();
  if (id === undefined) return '-';
  if (typeof id === 'object' && id !== null) {
    throw new Error('Only strings, numbers, booleans, null and ObjectID are supported as document ids');
  }
  return `~${JSON.stringify(id)}`;
}

export function idParse(text: string): unknown {
  if (text === '') return text;
  if (text === '-') return undefined;
  const first = text.charCodeAt(0);
  if (first === 45) return text.slice(1);
  if (first === 126) return JSON.parse(text.slice(1)) as unknown;
  if (looksLikeObjectID(text)) return new ObjectID(text);
  return text;
}
