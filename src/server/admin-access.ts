/**
 * Who may read the operational endpoints (`/perseid/stats` today; the metrics
 * and the dashboard build on this too). They list every live query's selector
 * and so other users' parameters: private by default. Allowed are requests
 * from loopback (a person or a scraper on the machine), or, when an admin
 * token is set (`PERSEID_ADMIN_TOKEN`), only requests carrying it as
 * `Authorization: Bearer <token>`, loopback included. Behind proxies
 * (HTTP_FORWARDED_COUNT) the client is the forwarded address, so a proxy on
 * the same host does not make every visitor "loopback".
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { forwardedAddress, forwardedCountFromEnv } from './connection-handle.js';

export interface AdminAccess {
  /** The token requests must carry; undefined for loopback-only access. */
  token: string | undefined;
  /** Proxies in front of the server. */
  forwardedCount: number;
}

export function adminAccessFromEnv(env: NodeJS.ProcessEnv = process.env): AdminAccess {
  return { token: adminToken(env.PERSEID_ADMIN_TOKEN), forwardedCount: forwardedCountFromEnv(env) };
}

function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return v4 === '::1' || /^127\.\d+\.\d+\.\d+$/.test(v4);
}

/** Compares in time independent of where the texts differ (hashing first makes the lengths equal). */
function sameSecret(given: string, expected: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/** What `Authorization: Bearer <token>` carries as sent: visible ASCII, no space (HTTP clients send other characters as UTF-8 bytes, read back as Latin-1). */
const SENDABLE_TOKEN = /^[\x21-\x7e]+$/;

/**
 * The token as a request can carry it: HTTP clients send a header's value without the spaces and line
 * break around it, so a token read from a file that ends in a newline (a Kubernetes secret, say) was never matched.
 * One no request can carry (a space inside, an accented letter) is refused: every request was refused with 401.
 */
export function adminToken(raw: string | undefined): string | undefined {
  const token = raw?.trim();
  if (!token) return undefined;
  if (!SENDABLE_TOKEN.test(token)) {
    throw new TypeError('PERSEID_ADMIN_TOKEN may hold only visible ASCII characters, no spaces: no request could send it as Authorization: Bearer <token>');
  }
  return token;
}

/** Why `req` may not read an operational endpoint, or undefined when it may. */
export function adminRefusal(req: IncomingMessage, access: AdminAccess): { status: 401 | 403; message: string } | undefined {
  if (access.token !== undefined) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (match && sameSecret(match[1]!, access.token)) return undefined;
    return { status: 401, message: 'Send the admin token: Authorization: Bearer <PERSEID_ADMIN_TOKEN>' };
  }
  const client = access.forwardedCount > 0 ? forwardedAddress(req.headers, access.forwardedCount) : req.socket.remoteAddress;
  if (isLoopback(client)) return undefined;
  return { status: 403, message: 'Only from the server itself (loopback), or with PERSEID_ADMIN_TOKEN set and sent as a Bearer token' };
}

/** Answers 401/403 and returns false when `req` may not read an operational endpoint. */
export function guardAdmin(req: IncomingMessage, res: ServerResponse, access: AdminAccess): boolean {
  const refusal = adminRefusal(req, access);
  if (!refusal) return true;
  const headers: Record<string, string> = { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' };
  if (refusal.status === 401) headers['www-authenticate'] = 'Bearer realm="perseid"';
  res.writeHead(refusal.status, headers);
  res.end(refusal.message + '\n');
  return false;
}
