/**
 * A ceiling on HTTP request bodies, in front of the `sockjs` package, which
 * reads an `xhr_send` or `jsonp_send` body whole, without limit, copying it on
 * every chunk: a body above the limit is refused with 413 before it is read
 * (by its Content-Length), or, sent in chunks, as soon as it passes the limit.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { transportMetrics } from './transport-metrics.js';

function refuse(req: IncomingMessage, res: ServerResponse, limit: number): void {
  transportMetrics.refusedRequests.inc();
  if (res.headersSent) {
    req.socket.destroy();
    return;
  }
  res.writeHead(413, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' });
  res.end(`Request body too large (the limit is ${limit} bytes)\n`, () => req.socket.destroy());
}

/**
 * Returns false when the request was refused (answered here). Otherwise the
 * handler that reads the body may go on; should a chunked body outgrow the
 * limit, whoever reads it stops hearing of it and the request is answered 413.
 */
export function limitBody(req: IncomingMessage, res: ServerResponse, limit: number): boolean {
  const declared = req.headers['content-length'];
  if (declared !== undefined) {
    if (Number(declared) > limit) {
      refuse(req, res, limit);
      return false;
    }
    return true; // Node's parser delivers no more than the declared length
  }
  let seen = 0;
  const count = (chunk: Buffer) => {
    seen += chunk.length;
    if (seen <= limit) return;
    // The body's readers (sockjs) must not see its end, nor answer after us.
    req.removeAllListeners('data');
    req.removeAllListeners('end');
    req.resume();
    refuse(req, res, limit);
  };
  req.on('data', count);
  return true;
}
