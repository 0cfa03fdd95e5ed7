/**
 * Meteor's DDP endpoints on an HTTP server (DDP notes §3.1):
 * - `/websocket` and `/sockjs/websocket`: raw WebSocket, one DDP message per frame;
 * - `/sockjs/<server>/<session>/websocket`: SockJS framing over a WebSocket;
 * - everything else under `/sockjs` (`/info`, polling and streaming transports): the `sockjs` package.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import sockjs from 'sockjs';
import { WebSocketServer } from 'ws';
import { defineCloseReason } from '../ddp/errors.js';
import type { Logger } from '../log.js';
import { isRawWebSocketPath, isSockjsWebSocketPath, pathOf } from './paths.js';
import type { CompressionOptions, FrameVariant } from './frames.js';
import type { DdpSocket } from './socket.js';
import { SockjsConnection } from './sockjs-connection.js';
import { WebSocketConnection } from './websocket-connection.js';

export interface TransportOptions {
  /** Largest DDP message accepted, in bytes; larger ones get a DDP error and are dropped. */
  maxMessageSize: number;
  /** Largest WebSocket frame read at all; larger ones close the connection (1009). */
  maxFrameSize: number;
  /** permessage-deflate settings, or false to not offer compression. */
  compression: CompressionOptions | false;
  /** Outgoing bytes a client may leave unread before it is dropped. */
  maxBufferedBytes: number;
  /** SockJS heartbeat frame interval (Meteor: 45 s). */
  sockjsHeartbeatMs: number;
  /** How long a polling SockJS session survives without a request (Meteor: 60 s). */
  sockjsDisconnectDelayMs: number;
}

/** `ws` closes a connection whose frame is larger than `maxFrameSize` with this code and no reason. */
defineCloseReason('FRAME_TOO_LARGE', 1009, '');

/** Reads the server window size out of the negotiated Sec-WebSocket-Extensions answer. */
function negotiatedVariant(responseHeaders: string[], framing: 'raw' | 'sockjs'): FrameVariant {
  const line = responseHeaders.find((h) => h.toLowerCase().startsWith('sec-websocket-extensions:'));
  if (!line || !/permessage-deflate/i.test(line)) return framing === 'raw' ? 'plain' : 'sockjs';
  const bits = /server_max_window_bits=(\d+)/i.exec(line);
  const windowBits = bits ? Number(bits[1]) : 15;
  return framing === 'raw' ? `deflate-${windowBits}` : `sockjs-deflate-${windowBits}`;
}

export class TransportEndpoint {
  private readonly wss: WebSocketServer;
  private readonly sockjsHandler: (req: IncomingMessage, res: ServerResponse, head?: Buffer) => boolean;
  private readonly negotiated = new WeakMap<IncomingMessage, string[]>();
  private readonly sockjsSockets = new Set<WebSocketConnection>();
  private readonly heartbeatTimer: NodeJS.Timeout;

  constructor(
    private readonly options: TransportOptions,
    private readonly onConnection: (socket: DdpSocket) => void,
    private readonly log: Logger,
  ) {
    this.wss = new WebSocketServer({
      noServer: true,
      clientTracking: false,
      maxPayload: options.maxFrameSize,
      // Context takeover off on our side: a compressed frame then depends on nothing
      // but the message, so one compression serves every client.
      perMessageDeflate: options.compression ? { serverNoContextTakeover: true, clientNoContextTakeover: true } : false,
    });
    this.wss.on('headers', (headers, request) => this.negotiated.set(request, headers));

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
      if (conn) this.onConnection(new SockjsConnection(conn, options.maxMessageSize));
    });
    this.sockjsHandler = (server as unknown as { listener(o: object): { getHandler(): TransportEndpoint['sockjsHandler'] } })
      .listener({})
      .getHandler();
    this.heartbeatTimer = setInterval(() => {
      for (const socket of this.sockjsSockets) socket.heartbeat();
    }, options.sockjsHeartbeatMs);
    this.heartbeatTimer.unref();
  }

  /** Handles an HTTP request under `/sockjs`; returns false for paths that are not ours. */
  handleRequest(req: IncomingMessage, res: ServerResponse): boolean {
    if (!pathOf(req.url).startsWith('/sockjs')) return false;
    return this.sockjsHandler(req, res);
  }

  /** Handles a WebSocket upgrade; returns false (leaving the socket untouched) for paths that are not ours. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    const path = pathOf(req.url);
    const framing = isRawWebSocketPath(path) ? 'raw' : isSockjsWebSocketPath(path) ? 'sockjs' : undefined;
    if (!framing) return false;
    this.wss.handleUpgrade(req, socket, head, (ws, request) => {
      const variant = negotiatedVariant(this.negotiated.get(request) ?? [], framing);
      this.negotiated.delete(request);
      const connection = new WebSocketConnection(ws, socket, request, {
        framing,
        variant,
        compression: this.options.compression || undefined,
        maxMessageSize: this.options.maxMessageSize,
        maxBufferedBytes: this.options.maxBufferedBytes,
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
    this.wss.close();
  }
}
