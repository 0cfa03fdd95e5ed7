/**
 * How DDP data messages change a set of documents, with Meteor's tolerance for
 * servers that repeat themselves: `added` for a known document acts as a change,
 * `changed` for an unknown one adds it, `removed` for an unknown one is ignored.
 * Documents are never mutated, only replaced, so listeners can compare versions.
 */
import { equals } from '../ddp/ejson.js';
import { idParse } from '../ddp/ids.js';
import type {
  AddedBeforeMessage,
  AddedMessage,
  ChangedMessage,
  MovedBeforeMessage,
  RemovedMessage,
  ServerMessage,
} from '../ddp/messages.js';

export type Fields = Record<string, unknown>;

/** A document as the client sees it: the server's fields and `_id` (the DDP id, parsed). */
export interface Document {
  _id: unknown;
  [field: string]: unknown;
}

export type DocumentMessage = AddedMessage | ChangedMessage | RemovedMessage | AddedBeforeMessage | MovedBeforeMessage;

/** `fields` of a change lists what changed; a field set to `undefined` was removed. */
export type DocumentChange<T extends object = Document> =
  | { type: 'added'; id: string; doc: T }
  | { type: 'changed'; id: string; doc: T; previous: T; fields: Fields }
  | { type: 'removed'; id: string; doc: T };

export function isDocumentMessage(message: ServerMessage): message is DocumentMessage {
  switch (message.msg) {
    case 'added':
    case 'changed':
    case 'removed':
    case 'addedBefore':
    case 'movedBefore':
      return true;
    default:
      return false;
  }
}

/** The part of `update` that really changes `doc`, or undefined if nothing does. */
function effectiveChanges(doc: Document, update: Fields): Fields | undefined {
  let changes: Fields | undefined;
  for (const key of Object.keys(update)) {
    if (key === '_id') continue;
    const value = update[key];
    const present = Object.hasOwn(doc, key);
    if (value === undefined ? !present : present && equals(doc[key], value)) continue;
    (changes ??= {})[key] = value;
  }
  return changes;
}

function withChanges(doc: Document, changes: Fields): Document {
  const next = { ...doc };
  for (const [key, value] of Object.entries(changes)) {
    if (value === undefined) delete next[key];
    else next[key] = value;
  }
  return next;
}

function change(docs: Map<string, Document>, id: string, doc: Document, fields: Fields): DocumentChange | undefined {
  const changes = effectiveChanges(doc, fields);
  if (!changes) return undefined;
  const next = withChanges(doc, changes);
  docs.set(id, next);
  return { type: 'changed', id, doc: next, previous: doc, fields: changes };
}

function add(docs: Map<string, Document>, id: string, fields: Fields): DocumentChange {
  const doc: Document = { _id: idParse(id) };
  for (const [key, value] of Object.entries(fields)) if (key !== '_id' && value !== undefined) doc[key] = value;
  docs.set(id, doc);
  return { type: 'added', id, doc };
}

/** Applies one data message to `docs`; returns what it changed, if anything. */
export function applyDocumentMessage(
  docs: Map<string, Document>,
  message: DocumentMessage,
): DocumentChange | undefined {
  const existing = docs.get(message.id);
  switch (message.msg) {
    case 'added':
    case 'addedBefore': // ordering is not kept: Meteor servers never send it
    case 'changed': {
      const fields = message.fields ?? {};
      return existing ? change(docs, message.id, existing, fields) : add(docs, message.id, fields);
    }
    case 'removed':
      if (!existing) return undefined;
      docs.delete(message.id);
      return { type: 'removed', id: message.id, doc: existing };
    case 'movedBefore':
      return undefined;
  }
}

/**
 * Replaces the contents of `docs` with `next` and lists the differences. Documents
 * that did not change keep their old object, so a UI sees no change at all.
 */
export function replaceDocuments(docs: Map<string, Document>, next: Map<string, Document>): DocumentChange[] {
  const changes: DocumentChange[] = [];
  for (const [id, doc] of docs) {
    if (!next.has(id)) {
      docs.delete(id);
      changes.push({ type: 'removed', id, doc });
    }
  }
  for (const [id, doc] of next) {
    const existing = docs.get(id);
    if (!existing) {
      docs.set(id, doc);
      changes.push({ type: 'added', id, doc });
      continue;
    }
    const update: Fields = { ...doc };
    for (const key of Object.keys(existing)) if (!Object.hasOwn(doc, key)) update[key] = undefined;
    const changed = change(docs, id, existing, update);
    if (changed) changes.push(changed);
  }
  return changes;
}
