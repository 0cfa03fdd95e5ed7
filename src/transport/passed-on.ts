/**
 * Marks a WebSocket upgrade that another server of the cluster passed on (its
 * balancer added itself to X-Forwarded-For), so the connection counts that hop
 * as one of Perseid's own proxies and its client by its own address. A mark on
 * the request object, set only once the passing server's key checked out: a
 * header alone is the client's to forge.
 */
import type { IncomingMessage } from 'node:http';

const passedOn = new WeakSet<IncomingMessage>();

export function markPassedOn(req: IncomingMessage): void {
  passedOn.add(req);
}

/** Perseid's own proxies this upgrade came through: 1 when a peer balancer passed it on, else 0. */
export function upgradeOwnProxies(req: IncomingMessage): number {
  return passedOn.has(req) ? 1 : 0;
}
