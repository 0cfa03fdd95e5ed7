/**
 * Which web pages may open a DDP connection. A browser names the page's origin
 * in every WebSocket upgrade and cross-origin SockJS request; without a check,
 * any site a user visits could connect to the server as that user (with their
 * cookies and their network position). Allowed by default: the server's own
 * host (the request's Host, or behind proxies X-Forwarded-Host) and loopback
 * pages; more by list (`PERSEID_ALLOWED_ORIGINS`), or all with `*`. Requests
 * without an Origin header come from programs, not pages, and are allowed.
 */
import type { IncomingMessage } from 'node:http';

/** `*` (any origin) or a list of origins such as `https://app.example.com`. */
export type AllowedOrigins = '*' | readonly string[];

/** Reads a comma-separated list (`*` alone for any); throws an Error naming the entry that is not an origin. */
export function parseAllowedOrigins(text: string): AllowedOrigins {
  const entries = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (entries.includes('*')) return '*';
  return entries.map((entry) => {
    let url: URL;
    try {
      url = new URL(entry);
    } catch {
      throw new Error(`'${entry}' is not an origin (write it as scheme://host[:port], e.g. https://app.example.com)`);
    }
    if (url.origin === 'null') throw new Error(`'${entry}' is not an origin (write it as scheme://host[:port], e.g. https://app.example.com)`);
    return url.origin;
  });
}

function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname.endsWith('.localhost') || hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

/** `host[:port]` as URL.host writes it (lower case, default port dropped). */
function normalHost(value: string, protocol: string): string | undefined {
  try {
    return new URL(`${protocol}//${value.trim()}`).host;
  } catch {
    return undefined;
  }
}

/** Whether the request may proceed: no Origin, or an allowed one (listed, or one of `peers`: the other servers of a cluster). */
export function originAllowed(req: IncomingMessage, allowed: AllowedOrigins, forwardedCount: number, peers: readonly string[] = []): boolean {
  const origin = req.headers.origin;
  if (origin === undefined || allowed === '*') return true;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false; // `null` (sandboxed frames, file: pages) and anything unparsable
  }
  if (url.origin === 'null') return false;
  if (isLoopbackHost(url.hostname)) return true;
  if (allowed.includes(url.origin) || peers.includes(url.origin)) return true;
  const hosts = [req.headers.host ?? ''];
  const forwardedHost = req.headers['x-forwarded-host'];
  if (forwardedCount > 0 && typeof forwardedHost === 'string') hosts.push(...forwardedHost.split(','));
  return hosts.some((host) => normalHost(host, url.protocol) === url.host);
}
