/** `this.connection` in methods and publications, and what `onConnection` callbacks get (Meteor's shape). */
import type { IncomingHttpHeaders } from 'node:http';

export interface ConnectionHandle {
  readonly id: string;
  readonly clientAddress: string | undefined;
  readonly httpHeaders: Record<string, string>;
  /** True once the connection has ended (its onClose callbacks have run): work that outlived it keeps nothing for it. */
  readonly closed: boolean;
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

/** HTTP_FORWARDED_COUNT: how many proxies stand in front of the server (Meteor's variable). */
export function forwardedCountFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const count = Number(env.HTTP_FORWARDED_COUNT ?? 0);
  return Number.isInteger(count) && count > 0 ? count : 0;
}

/** How many addresses X-Forwarded-For lists: one per proxy the connection came through (or that the client made up). */
export function forwardedHops(headers: IncomingHttpHeaders): number {
  const forwarded = headers['x-forwarded-for'];
  return typeof forwarded === 'string' ? forwarded.split(',').length : 0;
}

/**
 * The address `count` proxies report the client at: the entry of
 * X-Forwarded-For that many from the end (each proxy appends the address it
 * was reached from). Undefined when the header has fewer entries.
 */
export function forwardedAddress(headers: IncomingHttpHeaders, count: number): string | undefined {
  const forwarded = headers['x-forwarded-for'];
  if (typeof forwarded !== 'string') return undefined;
  const hops = forwarded.split(',').map((s) => s.trim());
  return hops.length >= count ? hops[hops.length - count] : undefined;
}

/**
 * The client's address. Behind proxies, set HTTP_FORWARDED_COUNT to the number
 * of proxies in front of the server, as in Meteor: the address is then read from
 * X-Forwarded-For, that many entries from the end.
 */
export function clientAddress(remoteAddress: string | undefined, headers: IncomingHttpHeaders, count = forwardedCountFromEnv()): string | undefined {
  if (!count) return remoteAddress;
  return forwardedAddress(headers, count) ?? remoteAddress;
}
