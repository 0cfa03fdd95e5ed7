/**
 * The seam between a database and the live queries: every write becomes a
 * change event on its collection. Implementations: the embedded store's write
 * log (in-process), and for MongoDB change streams, oplog tailing and polling.
 */
import type { Document } from './types.js';

export type ChangeOp = 'insert' | 'update' | 'remove';

export interface DocumentChange {
  /** Position in the source's total order of changes; strictly increasing. */
  readonly seq: number;
  readonly collection: string;
  readonly op: ChangeOp;
  /** The document's `_id`. */
  readonly id: unknown;
  /** The whole document after an insert or update, when the source carries it. */
  readonly doc?: Document;
  /**
   * For an update without `doc`: the update as the source saw it (`$set`,
   * `$unset`, ... with dotted paths), applied to the live query's copy of the
   * document when it has one. Without either, the document is read by `_id`.
   */
  readonly modifier?: Document;
}

/** "Anything in this collection may have changed": the listener must re-read (after a gap, a drop, a reconnect). */
export interface ResyncChange {
  readonly seq: number;
  readonly collection: string;
  readonly op: 'resync';
  readonly reason: string;
}

export type ChangeEvent = DocumentChange | ResyncChange;
export type ChangeListener = (event: ChangeEvent) => void;

/** What a change source follows, as a bounded label for the APM (a worker reports its primary's). */
export type ChangeSourceKind = 'change-stream' | 'oplog' | 'polling' | 'embedded' | 'fanout' | 'none';

/** The change source chosen is one the database cannot give: one line saying what to choose instead (the CLI prints it so). */
export class ChangeSourceUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ChangeSourceUnavailableError';
  }
}

export interface ChangeSource {
  /** Human-readable name, shown in logs and metrics ("embedded write log", "change stream", ...). */
  readonly name: string;
  /** Its kind, for figures by change source (`name` is for people). */
  readonly kind: ChangeSourceKind;
  /** Delivers every change of `collection`, in order, until the returned function is called. */
  watch(collection: string, listener: ChangeListener): () => void;
  /**
   * The seq by which a write (identified by the token its driver returned) has
   * been delivered to every listener; a number when that has already happened.
   */
  delivered(token: unknown): number | Promise<number>;
  /**
   * Resolves once changes of `collection` are being received, for sources that
   * start receiving some time after `watch` (a change stream opening). A live
   * query reads its initial result only after this, so no change falls between.
   */
  ready?(collection: string): Promise<void>;
  /**
   * What the live queries of `collection` depend on: every document, or only
   * these (idStringify'd) ids. Sources that can receive less (per-document
   * fan-out channels) use it; others ignore it.
   */
  interest?(collection: string, ids: ReadonlySet<string> | 'all'): void;
}
