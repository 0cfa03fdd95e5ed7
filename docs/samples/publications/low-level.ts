// The low-level API: added, changed, removed and ready, for data that is not a query.
import type { PerseidServer } from 'perseid';

export function setup(server: PerseidServer): void {
  server.publish('clock', function (intervalMs: unknown) {
    const every = Math.max(100, Number(intervalMs) || 1000);
    this.added('clock', 'now', { at: new Date() });
    this.ready();
    const timer = setInterval(() => this.changed('clock', 'now', { at: new Date() }), every);
    this.onStop(() => clearInterval(timer));
  });
}
