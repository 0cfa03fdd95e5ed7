/**
 * Meteor's DDP endpoints on an HTTP server (DDP notes §3.1):
 * - `/websocket` and `/sockjs/websocket`: raw WebSocket, one DDP message per frame;
 * - `/sockjs/<server>/<session>/websocket`: SockJS framing over a WebSocket;
 * - everything else under `/sockjs` (`/info`, polling and streaming transports): the `sockjs` package.
 *
 * What comes in is bounded before it is read: a WebSocket message by
 * `ws`'s maxPayload (counted across fragments and while inflating), an HTTP
 * body by its length; pages from origins not allowed are refused.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import sockjs from 'sockjs';
import { WebSocketServer } from 'ws';
import { defineCloseReason } from '../ddp/errors.js';
import type { Logger } from '../log.js';
import { limitBody } from './body-limit.js';
import { originAllowed, type AllowedOrigins } from './origins.js';
import { InputBudget } from './input-budget.js';
import { OutputBudget } from './output-budget.js';
import { isRawWebSocketPath, isSockjsWebSocketPath, pathOf } from './paths.js';
import type { CompressionOptions, FrameVariant } from './frames.js';
import type { DdpSocket } from './socket.js';
import { SockjsConnection } from './sockjs-connection.js';
import { transportMetrics } from './transport-metrics.js';
import { WebSocketConnection } from './websocket-connection.js';

export interface TransportOptions {
  /**
   * Largest DDP message accepted, in bytes. On a raw WebSocket, a larger message
   * closes the connection (1009) as soon as its fragments or its inflated bytes
   * pass the limit; SockJS frames and bodies may be twice as large (quoting),
   * and a message in them above the limit gets a DDP error.
   */
  maxMessageSize: number;
  /** Messages one connection may have waiting (the session's queue limit; also bounds a SockJS frame's or body's). */
  maxQueuedMessages: number;
  /** permessage-deflate settings, or false to not offer compression. */
  compression: CompressionOptions | false;
  /** Outgoing bytes a client may leave unread before it is dropped. */
  maxBufferedBytes: number;
  /**
   * Unsent output over every connection past which the biggest holders are held
   * back, then dropped; also the budget of incoming bytes of messages not yet complete.
   */
  maxTotalBufferedBytes: number;
  /** Pages allowed to connect (their Origin header). */
  allowedOrigins: AllowedOrigins;
  /** Proxies in front of the server (HTTP_FORWARDED_COUNT): X-Forwarded-Host then names the server too. */
  forwardedCount: number;
  /** SockJS heartbeat frame interval (Meteor: 45 s). */
  sockjsHeartbeatMs: number;
  /** How long a polling SockJS session survives without a request (Meteor: 60 s). */
  sockjsDisconnectDelayMs: number;
}

/** `ws` closes a connection whose message passes the size limit with this code and no reason. */
defineCloseReason('MESSAGE_TOO_BIG', 1009, '');

/** A SockJS frame or body carries messages JSON-quoted in an array: room for the quoting. */
export function sockjsEnvelopeSize(maxMessageSize: number): number {
  return 2 * maxMessageSize + 64;
}

/** Unread output at which a session stops building replies for its client. */
function outputHighWater(maxBufferedBytes: number): number {
  return Math.min(1024 * 1024, Math.ceil(maxBufferedBytes / 4));
}

function refuseUpgrade(socket: Duplex, status: string): void {
  transportMetrics.refusedRequests.inc();
  socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
}

/** Reads the server window size out of the negotiated Sec-WebSocket-Extensions answer. */
function negotiatedVariant(responseHeaders: string[], framing: 'raw' | 'sockjs'): FrameVariant {
  const line = responseHeaders.find((h) => h.toLowerCase().startsWith('sec-websocket-extensions:'));
  if (!line || !/permessage-deflate/i.test(line)) return framing === 'raw' ? 'plain' : 'sockjs';
  const bits = /server_max_window_bits=(\d+)/i.exec(line);
  const windowBits = bits ? Number(bits[1]) : 15;
  return framing === 'raw' ? `deflate-${windowBits}` : `sockjs-deflate-${windowBits}`;
}

export class TransportEndpoint {
  readonly budget: OutputBudget;
  /** Incoming bytes of messages not yet complete, over every WebSocket; the same limit as the output's. */
  readonly inputBudget: InputBudget;
  private readonly rawWss: WebSocketServer;
  private readonly sockjsWss: WebSocketServer;
  private readonly sockjsHandler: (req: IncomingMessage, res: ServerResponse, head?: Buffer) => boolean;
  private readonly negotiated = new WeakMap<IncomingMessage, string[]>();
  private readonly sockjsSockets = new Set<WebSocketConnection>();
  private readonly heartbeatTimer: NodeJS.Timeout;
  /** Proxies of our own in front of SockJS's HTTP requests: 1 in a worker, whose primary passes them on. */
  sockjsOwnProxies = 0;
  /** The origins of the other servers of a cluster, whose pages may connect here too. */
  peerOrigins: () => readonly string[] = () => [];

  constructor(
    private readonly options: TransportOptions,
    private readonly onConnection: (socket: DdpSocket) => void,
    private readonly log: Logger,
  ) {
    this.budget = new OutputBudget(options.maxTotalBufferedBytes, log);
    this.inputBudget = new InputBudget(options.maxTotalBufferedBytes, log);
    // Context takeover off on our side: a compressed frame then depends on nothing
    // but the message, so one compression serves every client.
    const perMessageDeflate = options.compression ? { serverNoContextTakeover: true, clientNoContextTakeover: true } : false;
    // maxPayload is what `ws` counts a message against: every fragment's length as
    // its header arrives, and the inflated bytes as they come out of zlib.
    // allowSynchronousEvents off: `ws` hands over one message per event-loop turn
    // and connection, so a client that pipelines thousands of messages in one
    // packet takes its turn with everyone else's instead of ahead of them.
    const shared = { noServer: true, clientTracking: false, perMessageDeflate, allowSynchronousEvents: false };
    this.rawWss = new WebSocketServer({ ...shared, maxPayload: options.maxMessageSize });
    this.sockjsWss = new WebSocketServer({ ...shared, maxPayload: sockjsEnvelopeSize(options.maxMessageSize) });
    for (const wss of [this.rawWss, this.sockjsWss]) wss.on('headers', (headers, request) => this.negotiated.set(request, headers));

    const server = sockjs.createServer({
      prefix: '/sockjs',
      websocket: true,
      heartbeat_delay: options.sockjsHeartbeatMs,
      disconnect_delay: options.sockjsDisconnectDelayMs,
      log: (severity: string, line: string) => {
        if (severity === 'error') log.warn(line);
        else log.debug(line);
      },
    });
    server.on('connection', (conn) => {
      // sockjs emits a null connection for sessions that closed before opening.
      if (!conn) return;
      this.onConnection(
        new SockjsConnection(conn, {
          maxMessageSize: options.maxMessageSize,
          maxQueuedMessages: options.maxQueuedMessages,
          maxBufferedBytes: options.maxBufferedBytes,
          outputHighWater: outputHighWater(options.maxBufferedBytes),
          budget: this.budget,
          ownProxies: this.sockjsOwnProxies,
          log,
        }),
      );
    });
    this.sockjsHandler = (server as unknown as { listener(o: object): { getHandler(): TransportEndpoint['sockjsHandler'] } })
      .listener({})
      .getHandler();
    this.heartbeatTimer = setInterval(() => {
      for (const socket of this.sockjsSockets) socket.heartbeat();
    }, options.sockjsHeartbeatMs);
    this.heartbeatTimer.unref();
  }

  /** Whether a request's page (its Origin) may connect. */
  originAllowed(req: IncomingMessage): boolean {
    return originAllowed(req, this.options.allowedOrigins, this.options.forwardedCount, this.peerOrigins());
  }

  /** Handles an HTTP request under `/sockjs`; returns false for paths that are not ours. */
  handleRequest(req: IncomingMessage, res: ServerResponse): boolean {
    if (!pathOf(req.url).startsWith('/sockjs')) return false;
    if (!this.originAllowed(req)) {
      transportMetrics.refusedRequests.inc();
      res.writeHead(403, { 'content-type': 'text/plain; charset=utf-8' });
      res.end('Origin not allowed (see PERSEID_ALLOWED_ORIGINS)\n');
      return true;
    }
    if (req.method === 'POST' && !limitBody(req, res, sockjsEnvelopeSize(this.options.maxMessageSize))) return true;
    return this.sockjsHandler(req, res);
  }

  /** Handles a WebSocket upgrade; returns false (leaving the socket untouched) for paths that are not ours. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    const path = pathOf(req.url);
    const framing = isRawWebSocketPath(path) ? 'raw' : isSockjsWebSocketPath(path) ? 'sockjs' : undefined;
    if (!framing) return false;
    if (!this.originAllowed(req)) {
      this.log.debug('refused a WebSocket from a page of another origin', { origin: req.headers.origin, remote: req.socket.remoteAddress });
      refuseUpgrade(socket, '403 Forbidden');
      return true;
    }
    const wss = framing === 'raw' ? this.rawWss : this.sockjsWss;
    wss.handleUpgrade(req, socket, head, (ws, request) => {
      const variant = negotiatedVariant(this.negotiated.get(request) ?? [], framing);
      this.negotiated.delete(request);
      const connection = new WebSocketConnection(ws, socket, request, {
        framing,
        variant,
        compression: this.options.compression || undefined,
        maxMessageSize: this.options.maxMessageSize,
        maxQueuedMessages: this.options.maxQueuedMessages,
        maxBufferedBytes: this.options.maxBufferedBytes,
        outputHighWater: outputHighWater(this.options.maxBufferedBytes),
        budget: this.budget,
        inputBudget: this.inputBudget,
        log: this.log,
      });
      if (framing === 'sockjs') {
        this.sockjsSockets.add(connection);
        ws.on('close', () => this.sockjsSockets.delete(connection));
      }
      this.onConnection(connection);
    });
    return true;
  }

  close(): void {
    clearInterval(this.heartbeatTimer);
    this.rawWss.close();
    this.sockjsWss.close();
    this.budget.close();
  }
}
