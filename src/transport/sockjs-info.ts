/**
 * SockJS's `/info` answer (what sockjs-node sends), optionally with a
 * `base_url`: the SockJS client then sends all of its session's requests there,
 * which is how a balancer pins a client to one server (Meteor's client follows it).
 */
import { randomInt } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

function cors(req: IncomingMessage, res: ServerResponse): void {
  const origin = req.headers.origin;
  res.setHeader('Access-Control-Allow-Origin', origin && origin !== 'null' ? origin : '*');
  res.setHeader('Access-Control-Allow-Credentials', 'true');
  res.setHeader('Vary', 'Origin');
}

/** `originAllowed`: whether the page asking may connect (see origins.ts); a page that may not gets 403, not CORS headers. */
export function answerSockjsInfo(req: IncomingMessage, res: ServerResponse, baseUrl: string | undefined, originAllowed: boolean): void {
  if (!originAllowed) {
    res.writeHead(403, { 'content-type': 'text/plain; charset=utf-8' });
    res.end('Origin not allowed (see PERSEID_ALLOWED_ORIGINS)\n');
    return;
  }
  cors(req, res);
  if (req.method === 'OPTIONS') {
    res.setHeader('Access-Control-Allow-Methods', 'OPTIONS, GET');
    res.setHeader('Cache-Control', 'public, max-age=31536000');
    res.writeHead(204);
    res.end();
    return;
  }
  const info: Record<string, unknown> = { websocket: true, origins: ['*:*'], cookie_needed: false, entropy: randomInt(0, 2 ** 32 - 1) };
  if (baseUrl) info.base_url = baseUrl;
  res.writeHead(200, { 'Content-Type': 'application/json; charset=UTF-8', 'Cache-Control': 'no-store, no-cache, no-transform, must-revalidate, max-age=0' });
  res.end(JSON.stringify(info));
}
