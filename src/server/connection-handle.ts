/** `this.connection` in methods and publications, and what `onConnection` callbacks get (Meteor's shape). */
import type { IncomingHttpHeaders } from 'node:http';

export interface ConnectionHandle {
  readonly id: string;
  readonly clientAddress: string | undefined;
  readonly httpHeaders: Record<string, string>;
  onClose(callback: () => void): void;
  close(): void;
}

// Meteor exposes only these request headers to application code.
const EXPOSED_HEADERS = ['host', 'user-agent', 'x-forwarded-for', 'x-real-ip', 'x-forwarded-host', 'x-forwarded-proto'];

export function exposedHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of EXPOSED_HEADERS) {
    const value = headers[name];
    if (typeof value === 'string') out[name] = value;
  }
  return out;
}

/**
 * The client's address. Behind proxies, set HTTP_FORWARDED_COUNT to the number
 * of proxies in front of the server, as in Meteor: the address is then read from
 * X-Forwarded-For, that many entries from the end.
 */
export function clientAddress(remoteAddress: string | undefined, headers: IncomingHttpHeaders): string | undefined {
  const count = Number(process.env.HTTP_FORWARDED_COUNT ?? 0);
  const forwarded = headers['x-forwarded-for'];
  if (!count || typeof forwarded !== 'string') return remoteAddress;
  const hops = forwarded.split(',').map((s) => s.trim());
  return hops[hops.length - count] ?? remoteAddress;
}
