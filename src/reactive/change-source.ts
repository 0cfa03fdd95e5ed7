/**
 * The seam between a database and the live queries: every write becomes a
 * change event on its collection. Implementations: the embedded store's write
 * log (in-process), and for MongoDB change streams, oplog tailing and polling.
 */
import type { Document } from '../data/types.js';

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

export interface ChangeSource {
  /** Human-readable name, shown in logs and metrics ("embedded write log", "change stream", ...). */
  readonly name: string;
  /** Delivers every change of `collection`, in order, until the returned function is called. */
  watch(collection: string, listener: ChangeListener): () => void;
  /**
   * The seq by which a write (identified by the token its driver returned) has
   * been delivered to every listener; a number when that has already happened.
   */
  delivered(token: unknown): number | Promise<number>;
}
