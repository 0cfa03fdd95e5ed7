/**
 * What a load scenario drives: a DDP client with the calls a scenario needs.
 * Two implementations: `lean` (decodes only what it waits for; the built-in
 * scenarios use it so the generator is never the bottleneck) and `full` (the
 * perseid/client DDPClient, with local collections to wait on).
 */
import type { LocalCollection as ClientCollection } from '../client/local-collection.js';
import type { Document } from '../client/documents.js';

export interface ApplyOptions {
  /** Meteor's randomSeed: inserts inside the method get ids the caller can predict (see seededInsert). */
  randomSeed?: string;
}

export interface SubscriptionHandle {
  readonly id: string;
  /** Unsubscribes; resolves on the server's `nosub`. */
  stop(): Promise<void>;
}

export interface LoadClient {
  readonly mode: 'lean' | 'full';
  /** Calls a method; resolves once both `result` and `updated` arrived (its writes are visible). */
  call<T = unknown>(method: string, ...params: unknown[]): Promise<T>;
  apply<T = unknown>(method: string, params: unknown[], options?: ApplyOptions): Promise<T>;
  /** Subscribes; resolves on `ready`, rejects on `nosub` with an error. */
  subscribe(name: string, ...params: unknown[]): Promise<SubscriptionHandle>;
  /**
   * Resolves when the server has sent `added` (or `removed`) for document `id`
   * of `collection`; the wait starts before `action` runs, so nothing is missed.
   */
  expect(change: 'added' | 'removed', collection: string, id: string, action: () => Promise<unknown>): Promise<void>;
  /** A fresh randomSeed and the id an insert into `collection` gets in a method called with it. */
  seededInsert(collection: string): { randomSeed: string; id: string };
  /** The documents the subscriptions delivered (full client only). */
  collection<T extends Document = Document>(name: string): ClientCollection<T>;
  /** Closes; resolves once the connection is closed, so every message the server sent before it is counted. */
  close(): Promise<void>;
}

export interface ClientCounters {
  messagesIn: number;
  bytesIn: number;
  messagesOut: number;
  bytesOut: number;
}
