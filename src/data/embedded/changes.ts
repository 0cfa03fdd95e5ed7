/**
 * The embedded store's ChangeSource: its write log, delivered in process. A
 * batch's events are dispatched once the batch is durable, before the writes
 * that made them are acknowledged.
 */
import type { Logger } from '../../log.js';
import type { ChangeListener, ChangeSource, DocumentChange } from '../change-source.js';

interface Waiter {
  seq: number;
  resolve: (seq: number) => void;
}

export class WriteLogChanges implements ChangeSource {
  readonly name = 'embedded write log';
  readonly kind = 'embedded';
  private readonly listeners = new Map<string, Set<ChangeListener>>();
  private waiters: Waiter[] = [];

  constructor(
    /** Every change up to this seq has been dispatched. */
    private deliveredSeq: number,
    private readonly log: Logger,
  ) {}

  watch(collection: string, listener: ChangeListener): () => void {
    let set = this.listeners.get(collection);
    if (!set) this.listeners.set(collection, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(collection) === set) this.listeners.delete(collection);
    };
  }

  delivered(token: unknown): number | Promise<number> {
    if (typeof token !== 'number') throw new TypeError(`Not an embedded store write token: ${String(token)}`);
    if (token <= this.deliveredSeq) return token;
    return new Promise((resolve) => this.waiters.push({ seq: token, resolve }));
  }

  /** Delivers `events` (in seq order) to their collections' listeners; `throughSeq` ends the batch. */
  dispatch(events: readonly DocumentChange[], throughSeq: number): void {
    for (const event of events) {
      const set = this.listeners.get(event.collection);
      if (!set) continue;
      for (const listener of set) {
        try {
          listener(event);
        } catch (error) {
          // One failing live query must not starve the others or fail the write.
          this.log.error('change listener threw', { collection: event.collection, seq: event.seq, error });
        }
      }
    }
    this.deliveredSeq = throughSeq;
    if (this.waiters.length === 0) return;
    const due = this.waiters.filter((waiter) => waiter.seq <= throughSeq);
    this.waiters = this.waiters.filter((waiter) => waiter.seq > throughSeq);
    for (const waiter of due) waiter.resolve(waiter.seq);
  }

  close(): void {
    this.listeners.clear();
  }
}
