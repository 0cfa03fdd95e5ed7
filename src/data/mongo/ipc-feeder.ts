/**
 * Feeds a worker's change hub from its primary, which follows the database once
 * for the whole machine (see cluster/change-forwarder.ts) instead of every worker
 * opening its own change stream or oplog tailer.
 */
import type { ChangeEvent } from '../change-source.js';
import type { ChangeHub } from './change-hub.js';

/** The worker's channel to its primary's change feed. */
export interface FeedLink {
  /** The collections this worker's live queries watch. */
  watch(collections: string[]): void;
  /** This worker wrote to `collection` (the feed reads now rather than at its next pause). */
  poke(collection: string): void;
  onChange(handler: (event: ChangeEvent) => void): void;
  /** The primary follows `collection` now: changes from here on will arrive. */
  onWatching(handler: (collection: string) => void): void;
}

export class IpcFeeder {
  private readonly watching = new Set<string>();
  private readonly waiters = new Map<string, Array<() => void>>();

  constructor(
    hub: ChangeHub,
    private readonly link: FeedLink,
  ) {
    hub.onWatchedChange = (collections) => {
      for (const name of this.watching) if (!collections.has(name)) this.watching.delete(name);
      link.watch([...collections]);
    };
    hub.ready = (collection) => {
      if (this.watching.has(collection)) return Promise.resolve();
      return new Promise((resolve) => this.waiters.set(collection, [...(this.waiters.get(collection) ?? []), resolve]));
    };
    link.onWatching((collection) => {
      this.watching.add(collection);
      for (const resolve of this.waiters.get(collection) ?? []) resolve();
      this.waiters.delete(collection);
    });
    link.onChange((event) => {
      if (event.op === 'resync') hub.resync(event.reason, event.collection);
      else hub.emit({ collection: event.collection, op: event.op, id: event.id, doc: event.doc, modifier: event.modifier });
    });
  }

  poke(collection: string): void {
    this.link.poke(collection);
  }

  close(): void {
    for (const list of this.waiters.values()) for (const resolve of list) resolve();
    this.waiters.clear();
  }
}
