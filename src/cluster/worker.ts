/**
 * A worker's side of `perseid start --workers`: serve what the primary hands
 * over (WebSocket sockets, proxied SockJS requests), report its load, follow the
 * primary's change feed, and drain when told.
 */
import { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { FeedLink } from '../data/mongo/ipc-feeder.js';
import { parse } from '../ddp/ejson.js';
import type { ChangeEvent } from '../data/change-source.js';
import type { PerseidServer } from '../server/app.js';
import type { PrimaryToWorker, WorkerToPrimary } from './ipc-messages.js';
import { LoadMonitor } from './load-monitor.js';
import { markPassedOn } from '../transport/passed-on.js';

function toPrimary(message: WorkerToPrimary): void {
  process.send?.(message);
}

export function isWorker(): boolean {
  return process.env.PERSEID_WORKER_ID !== undefined && typeof process.send === 'function';
}

/** The primary's change feed, seen from the worker. */
export function primaryFeedLink(): FeedLink {
  return {
    watch: (collections) => toPrimary({ type: 'watch', collections }),
    poke: (collection) => toPrimary({ type: 'poke', collection }),
    onChange: (handler) =>
      process.on('message', (message: PrimaryToWorker) => {
        if (message.type === 'change') handler(parse(message.event) as ChangeEvent);
      }),
    onWatching: (handler) =>
      process.on('message', (message: PrimaryToWorker) => {
        if (message.type === 'watching') handler(message.collection);
      }),
  };
}

/** How a worker stops when its primary says so; each ends the process. */
export interface WorkerStops {
  drain(windowMs: number): void;
  close(): void;
}

/** Serves as a worker until the primary tells it to drain or close, or goes away. */
export async function serveAsWorker(server: PerseidServer, stops: WorkerStops): Promise<void> {
  // Only the primary listens publicly; this port is for the SockJS requests it proxies here.
  const { port } = await server.servedThroughPrimary().listen(0, '127.0.0.1');
  const monitor = new LoadMonitor(() => server.sessionCount);
  const reporting = setInterval(() => toPrimary({ type: 'load', ...monitor.sample() }), 1000);
  reporting.unref();
  process.on('message', (message: PrimaryToWorker, socket?: Socket) => {
    if (message.type === 'upgrade' && socket) {
      const req = new IncomingMessage(socket);
      req.method = message.method;
      req.url = message.url;
      req.headers = message.headers;
      if (message.passedOn) markPassedOn(req);
      server.httpServer.emit('upgrade', req, socket, Buffer.from(message.head, 'base64'));
    } else if (message.type === 'origins') {
      server.trustPeerOrigins(message.origins);
    } else if (message.type === 'drain') {
      stops.drain(message.windowMs);
    } else if (message.type === 'close') {
      stops.close();
    }
  });
  // Stopping is the primary's to order: a signal sent to every process of the machine (a terminal's Ctrl-C or hang-up,
  // systemd stopping a service) reaches it too, and a worker that stopped by itself would cut its clients off mid-drain.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => undefined);
  // Without its primary nobody can reach this worker: leave.
  process.on('disconnect', () => process.exit(0));
  toPrimary({ type: 'ready', httpPort: port, publicDir: server.publicDir });
}
