/**
 * Connections that have not yet sent a whole request. Node's HTTP server times
 * out a request once it has begun (headersTimeout), never a connection that
 * sends nothing: those were kept for good, so one client that opened 20,000
 * took every file descriptor and nobody else could connect. Such a connection
 * now has 10 s to send its first request's headers, and one address may keep
 * at most `perAddress` of them silent past their first second (more are closed;
 * new ones from it are refused meanwhile). The first second is free, since a
 * burst of connections is accepted before any has been read: a client that
 * opens thousands at once and speaks at once is not refused for it.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';
import { AddressLimit, DEFAULT_CONNECTIONS_PER_ADDRESS } from './address-limit.js';

/** How long a new connection may take to send its first request's headers. */
export const FIRST_REQUEST_MS = 10_000;
/** How long a connection may be silent before it counts against its address's limit. */
const COUNTED_AFTER_MS = 1000;

export interface SilentLimits {
  /** Silent connections per client address (IPv6: per /64), --max-connections-per-address; 0 for no limit. */
  perAddress: number | undefined;
  /** Proxies in front (HTTP_FORWARDED_COUNT): every client then shares their address, so no limit per address. */
  forwardedCount: number;
  /**
   * Whether the server takes WebSocket upgrades (has an `upgrade` listener). Only then is one listened for: with
   * any `upgrade` listener Node hands the socket over instead of answering the request as an ordinary one.
   */
  upgrades: boolean;
}

export function limitSilentConnections(server: Server, { perAddress, forwardedCount, upgrades }: SilentLimits, deadlineMs = FIRST_REQUEST_MS): void {
  const limit = new AddressLimit(forwardedCount > 0 ? 0 : (perAddress ?? DEFAULT_CONNECTIONS_PER_ADDRESS));
  const silent = new WeakMap<Socket, () => void>();
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress;
    if (limit.full(address)) {
      socket.destroy();
      return;
    }
    let counted = false;
    let timer = setTimeout(() => {
      counted = limit.take(address);
      if (!counted) socket.destroy();
      else timer = setTimeout(() => socket.destroy(), deadlineMs - COUNTED_AFTER_MS).unref();
    }, COUNTED_AFTER_MS).unref();
    const spoke = () => {
      if (!silent.delete(socket)) return;
      clearTimeout(timer);
      if (counted) limit.release(address);
    };
    silent.set(socket, spoke);
    socket.once('close', spoke);
  });
  const spoke = (req: IncomingMessage) => silent.get(req.socket)?.();
  server.prependListener('request', spoke);
  if (upgrades) server.prependListener('upgrade', spoke);
}
