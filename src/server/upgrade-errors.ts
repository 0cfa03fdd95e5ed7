/**
 * A socket Node hands to an `upgrade` listener has no `error` listener left.
 * An upgrade refused with a written answer (404 for a path that is not DDP's,
 * 503 from a jobs process or a draining primary) to a client that had already
 * reset the connection raised ECONNRESET as an uncaught exception, which
 * stopped the process: one request, reset at once, stopped any server. Each
 * such socket now gets a listener first, which only closes it.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';

export function containUpgradeErrors(server: Server): void {
  server.prependListener('upgrade', (_req: IncomingMessage, socket: Duplex) => {
    socket.on('error', () => socket.destroy());
  });
}
