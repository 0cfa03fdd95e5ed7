/**
 * Passing one HTTP request, or one WebSocket upgrade, on to another server.
 * Hand-written: the maintained proxy libraries bring far more than this
 * pass-through of bytes, and http-proxy is no longer maintained.
 */
import { request, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import type { Duplex } from 'node:stream';

export interface Target {
  host: string;
  port: number;
}

/** Headers that describe the hop, not the request, and must not be forwarded. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade']);

function forwardedHeaders(req: IncomingMessage, extra: Record<string, string>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(req.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  const client = req.socket.remoteAddress ?? '';
  out['x-forwarded-for'] = req.headers['x-forwarded-for'] ? `${String(req.headers['x-forwarded-for'])}, ${client}` : client;
  return { ...out, ...extra };
}

export function proxyRequest(req: IncomingMessage, res: ServerResponse, target: Target, extra: Record<string, string> = {}): void {
  const upstream = request({ host: target.host, port: target.port, method: req.method, path: req.url, headers: forwardedHeaders(req, extra) }, (reply) => {
    res.writeHead(reply.statusCode ?? 502, reply.headers);
    reply.pipe(res);
  });
  upstream.on('error', (error) => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain; charset=utf-8' });
    res.end(`Bad gateway: ${error.message}\n`);
  });
  // A client gone before its answer ended (a SockJS stream or long poll dropped) ends the request upstream too:
  // left open, it held the client's session on the server behind, as if still connected, for good.
  res.on('close', () => {
    if (!res.writableFinished) upstream.destroy();
  });
  req.pipe(upstream);
}

/** How long a target may take to answer an upgrade before the client is served some other way. */
export const UPGRADE_ANSWER_MS = 5000;

/**
 * Replays the upgrade request to `target` and then, once it answers, joins
 * the two connections byte for byte. Until it answers nothing has gone to the
 * client: when the target cannot be reached, closes without answering, or has
 * not answered within `answerMs` (a server stopped or stalled; its connection
 * is accepted by its kernel all the same, and the client waited for good),
 * `unreachable` may still serve the request some other way.
 */
export function proxyUpgrade(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  target: Target,
  extra: Record<string, string> = {},
  unreachable?: (error: Error) => void,
  answerMs = UPGRADE_ANSWER_MS,
): void {
  let settled = false;
  const upstream = connect({ host: target.host, port: target.port }, () => {
    const headers = forwardedHeaders(req, extra);
    let text = `${req.method} ${req.url} HTTP/1.1\r\nconnection: Upgrade\r\nupgrade: ${String(req.headers.upgrade ?? 'websocket')}\r\n`;
    for (const [name, value] of Object.entries(headers)) for (const v of Array.isArray(value) ? value : [value]) text += `${name}: ${v}\r\n`;
    upstream.write(text + '\r\n');
    if (head.length) upstream.write(head);
  });
  const fail = (error: Error) => {
    if (settled) return;
    settled = true;
    clearTimeout(deadline);
    upstream.destroy();
    if (unreachable) unreachable(error);
    else socket.destroy();
  };
  const deadline = setTimeout(() => fail(new Error(`no answer within ${answerMs} ms`)), answerMs).unref();
  upstream.once('data', (answer: Buffer) => {
    if (settled) return;
    settled = true;
    clearTimeout(deadline);
    socket.write(answer);
    upstream.pipe(socket);
    socket.pipe(upstream);
    upstream.on('close', () => socket.destroy());
  });
  upstream.on('error', fail);
  upstream.on('close', () => fail(new Error('closed without answering')));
  socket.on('error', () => upstream.destroy());
  socket.on('close', () => {
    // The client left: nothing more to serve, here or there.
    settled = true;
    clearTimeout(deadline);
    upstream.destroy();
  });
}
