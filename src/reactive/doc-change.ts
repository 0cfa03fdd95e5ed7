/** One change of a live query's result set, as handed to every observer of it. */
import { encodeAdded, encodeChanged, encodeRemoved, type EncodedMessage } from '../ddp/encoded.js';
import { equals } from '../ddp/ejson.js';

/** A document's published fields, without `_id`. Never mutated once published. */
export type Fields = Record<string, unknown>;

/** A published document held by a live query. */
export class ResultEntry {
  /** The `added` message for this version of the document, built once for every subscriber. */
  private addedMessage: EncodedMessage | undefined;
  /** The `added` change replayed to every observer that attaches while this version stands. */
  private addedChange: DocChange | undefined;

  constructor(
    readonly id: unknown,
    /** The DDP id string (`idStringify(id)`). */
    readonly key: string,
    public fields: Fields,
    /** The whole document as last seen: for sorting, and for applying updates reported as modifiers. */
    public doc?: Record<string, unknown>,
  ) {}

  added(collection: string): EncodedMessage {
    return (this.addedMessage ??= encodeAdded(collection, this.key, this.fields));
  }

  /** The change that adds this version of the document: one object for every observer replayed to. */
  addition(collection: string): DocChange {
    return (this.addedChange ??= DocChange.added(collection, this));
  }

  /** Takes new published fields: the cached `added` message and change no longer describe it. */
  setFields(fields: Fields): void {
    this.fields = fields;
    this.addedMessage = undefined;
    this.addedChange = undefined;
  }
}

export type ChangeKind = 'added' | 'changed' | 'removed';

export class DocChange {
  private encoded: EncodedMessage | undefined;

  private constructor(
    readonly kind: ChangeKind,
    readonly collection: string,
    readonly key: string,
    /** Published fields after the change (added, changed). */
    readonly after: Fields | undefined,
    /** Published fields before the change (changed, removed). */
    readonly before: Fields | undefined,
    /** Fields whose values changed or appeared (changed). */
    readonly fields: Fields | undefined,
    /** Fields that disappeared (changed). */
    readonly cleared: string[] | undefined,
    private readonly entry: ResultEntry | undefined,
  ) {}

  static added(collection: string, entry: ResultEntry): DocChange {
    return new DocChange('added', collection, entry.key, entry.fields, undefined, entry.fields, undefined, entry);
  }

  static removed(collection: string, key: string, before: Fields): DocChange {
    return new DocChange('removed', collection, key, undefined, before, undefined, undefined, undefined);
  }

  /** The change from `before` to `after`, or undefined when no published field differs. */
  static changed(collection: string, key: string, before: Fields, after: Fields): DocChange | undefined {
    const diff = diffFields(before, after);
    if (!diff) return undefined;
    return new DocChange('changed', collection, key, after, before, diff.fields, diff.cleared, undefined);
  }

  /** The DDP message for this change, serialised on first use and shared by every observer. */
  message(): EncodedMessage {
    if (this.encoded) return this.encoded;
    if (this.kind === 'added') return (this.encoded = this.entry!.added(this.collection));
    if (this.kind === 'removed') return (this.encoded = encodeRemoved(this.collection, this.key));
    return (this.encoded = encodeChanged(this.collection, this.key, this.fields, this.cleared));
  }
}

/** Top-level field differences, as DDP's `changed` carries them. */
export function diffFields(before: Fields, after: Fields): { fields: Fields | undefined; cleared: string[] | undefined } | undefined {
  let fields: Fields | undefined;
  let cleared: string[] | undefined;
  for (const key in after) {
    if (!(key in before) || !equals(before[key], after[key])) (fields ??= {})[key] = after[key];
  }
  for (const key in before) {
    if (!(key in after)) (cleared ??= []).push(key);
  }
  return fields || cleared ? { fields, cleared } : undefined;
}
