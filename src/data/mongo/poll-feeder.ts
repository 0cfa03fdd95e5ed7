/**
 * Feeds the change hub where the server streams nothing and no oplog is
 * available: every watched collection is re-read on an interval, and at once
 * after this process writes to it (Meteor's polling driver). Each "re-read"
 * is a resync event; the live queries re-run and diff, throttled.
 */
import type { ChangeHub } from './change-hub.js';

export class PollFeeder {
  private readonly timers = new Map<string, NodeJS.Timeout>();

  constructor(
    private readonly hub: ChangeHub,
    private readonly intervalMs: number,
  ) {
    hub.onWatchedChange = (collections) => {
      for (const name of collections) {
        if (this.timers.has(name)) continue;
        const timer = setInterval(() => this.hub.resync('poll interval', name, true), this.intervalMs);
        timer.unref();
        this.timers.set(name, timer);
      }
      for (const [name, timer] of this.timers) {
        if (collections.has(name)) continue;
        clearInterval(timer);
        this.timers.delete(name);
      }
    };
  }

  poke(collection: string): void {
    if (this.timers.has(collection)) this.hub.resync('written by this process', collection, true);
  }

  close(): void {
    for (const timer of this.timers.values()) clearInterval(timer);
    this.timers.clear();
  }
}
