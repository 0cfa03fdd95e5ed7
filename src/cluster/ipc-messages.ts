/** Messages between a primary and its workers (over the child-process IPC channel). */
import type { LoadFigures } from './load-monitor.js';

export type PrimaryToWorker =
  /** A WebSocket upgrade handed over; the socket travels as the message's handle. */
  /** `passedOn`: another server's balancer passed it on to the primary (passed-on.ts). */
  | { type: 'upgrade'; method: string; url: string; headers: Record<string, string | string[] | undefined>; head: string; passedOn: boolean }
  /** A change of a collection the worker watches (EJSON text of the ChangeEvent). */
  | { type: 'change'; event: string }
  /** The feed started watching a collection the worker asked for. */
  | { type: 'watching'; collection: string }
  /** Close sessions gradually over `windowMs`, then exit. */
  | { type: 'drain'; windowMs: number }
  /** Close every session now, then exit (the primary's last word to a worker slow to drain, or its own stop). */
  | { type: 'close' }
  /** The origins of the cluster's servers (whose pages may connect), as the primary's balancer knows them. */
  | { type: 'origins'; origins: string[] };

export type WorkerToPrimary =
  /** Up: its private HTTP port (for SockJS polling proxied to it) and the app's static files. */
  | { type: 'ready'; httpPort: number; publicDir?: string }
  | ({ type: 'load' } & LoadFigures)
  /** The collections its live queries watch now. */
  | { type: 'watch'; collections: string[] }
  /** It wrote to `collection`: read the feed now. */
  | { type: 'poke'; collection: string };
