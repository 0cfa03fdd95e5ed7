/**
 * A DDP connection over a WebSocket: raw (one DDP message per text frame, the
 * `/websocket` endpoint) or SockJS-framed (`o`, `h`, `a[...]`, `c[...]`, the
 * endpoint Meteor's browser client uses).
 *
 * `ws` does the handshake, parses incoming frames and negotiates
 * permessage-deflate; outgoing data frames are prebuilt and shared (frames.ts)
 * and written straight to the TCP socket. That is safe because this class never
 * asks `ws` to send data, so `ws`'s own writes (close, pong) are never queued
 * behind a compression and cannot be reordered with ours.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { RawData, WebSocket } from 'ws';
import type { EncodedMessage } from '../ddp/encoded.js';
import { defineCloseReason } from '../ddp/errors.js';
import type { Logger } from '../log.js';
import { BatchCache, scheduleFlush, type Flushable } from './flush.js';
import { frameFor, textFrame, type CompressionOptions, type FrameVariant } from './frames.js';
import type { DdpSocket, SocketHandlers } from './socket.js';
import { transportMetrics } from './transport-metrics.js';

export interface WebSocketConnectionOptions {
  framing: 'raw' | 'sockjs';
  variant: FrameVariant;
  compression: CompressionOptions | undefined;
  maxMessageSize: number;
  /** Outgoing bytes a client may leave unread before it is dropped as too slow. */
  maxBufferedBytes: number;
  log: Logger;
}

/** A SockJS-framed WebSocket whose frame is not a JSON array of strings. */
const BROKEN_FRAMING = defineCloseReason('BROKEN_FRAMING', 3000, 'Broken framing.');

const NO_HANDLERS: SocketHandlers = { message: () => undefined, oversize: () => undefined, close: () => undefined };

function rawDataLength(data: RawData): number {
  if (Array.isArray(data)) return data.reduce((n, b) => n + b.length, 0);
  return data instanceof ArrayBuffer ? data.byteLength : data.length;
}

function rawDataText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data instanceof ArrayBuffer ? new Uint8Array(data) : data).toString('utf8');
}

export class WebSocketConnection implements DdpSocket, Flushable {
  readonly transport: string;
  readonly remoteAddress: string | undefined;
  readonly remotePort: number | undefined;
  readonly headers: IncomingMessage['headers'];
  private handlers = NO_HANDLERS;
  private pending: EncodedMessage[] = [];
  private closed = false;

  constructor(
    private readonly ws: WebSocket,
    private readonly socket: Duplex,
    request: IncomingMessage,
    private readonly options: WebSocketConnectionOptions,
  ) {
    this.transport = options.framing === 'raw' ? 'websocket' : 'sockjs-websocket';
    this.remoteAddress = request.socket.remoteAddress;
    this.remotePort = request.socket.remotePort;
    this.headers = request.headers;
    ws.on('message', (data) => this.receive(data));
    ws.on('close', () => this.closedByPeer());
    // ws reports protocol violations (bad UTF-8, oversized frames) here and then closes.
    ws.on('error', (error) => options.log.debug('websocket error', { error: error.message, remote: this.remoteAddress }));
    if (options.framing === 'sockjs') socket.write(textFrame('o'));
  }

  get bufferedBytes(): number {
    return this.socket.writableLength;
  }

  setHandlers(handlers: SocketHandlers): void {
    this.handlers = handlers;
  }

  send(message: EncodedMessage): void {
    if (this.closed) return;
    if (this.pending.push(message) === 1) scheduleFlush(this);
  }

  flush(batches: BatchCache): void {
    const messages = this.pending;
    if (messages.length === 0 || this.closed) return;
    this.pending = [];
    // The peer's close frame has arrived and `ws` has answered it: nothing may follow a close frame.
    if (this.ws.readyState !== this.ws.OPEN) return;
    const { variant, compression } = this.options;
    const bytes =
      messages.length === 1
        ? frameFor(messages[0]!, variant, compression)
        : batches.join(messages, variant, (m) => frameFor(m, variant, compression));
    this.socket.write(bytes);
    transportMetrics.messagesSent.inc(messages.length);
    transportMetrics.bytesSent.inc(bytes.length);
    transportMetrics.writes.inc();
    if (this.socket.writableLength > this.options.maxBufferedBytes) {
      transportMetrics.slowClientsDropped.inc();
      this.options.log.warn('dropping a client that does not read its messages', {
        remote: this.remoteAddress,
        buffered: this.socket.writableLength,
      });
      this.closed = true;
      this.ws.terminate();
    }
  }

  /** SockJS's keep-alive frame, for proxies that drop idle connections. */
  heartbeat(): void {
    if (!this.closed && this.options.framing === 'sockjs') this.socket.write(textFrame('h'));
  }

  close(code = 1000, reason = ''): void {
    if (this.closed) return;
    this.flush(new BatchCache());
    this.closed = true;
    if (this.options.framing === 'sockjs') {
      this.socket.write(textFrame(`c[${code === 1000 ? 3000 : code},${JSON.stringify(reason || 'Go away!')}]`));
      this.ws.close(1000);
    } else {
      this.ws.close(code, reason);
    }
  }

  terminate(): void {
    this.closed = true;
    this.ws.terminate();
  }

  pause(): void {
    this.ws.pause();
  }

  resume(): void {
    this.ws.resume();
  }

  private receive(data: RawData): void {
    if (this.closed) return;
    const length = rawDataLength(data);
    if (length > this.options.maxMessageSize) {
      this.handlers.oversize(length);
      return;
    }
    const text = rawDataText(data);
    if (this.options.framing === 'raw') {
      this.handlers.message(text);
      return;
    }
    // SockJS clients send a JSON array of strings (sockjs-node also takes one bare string).
    if (text === '') return;
    let payload: unknown;
    try {
      payload = JSON.parse(text);
    } catch {
      this.close(BROKEN_FRAMING.code, BROKEN_FRAMING.reason);
      return;
    }
    const messages = Array.isArray(payload) ? payload : [payload];
    for (const message of messages) {
      if (typeof message !== 'string') {
        this.close(BROKEN_FRAMING.code, BROKEN_FRAMING.reason);
        return;
      }
      this.handlers.message(message);
    }
  }

  private closedByPeer(): void {
    this.closed = true;
    this.pending = [];
    const { close } = this.handlers;
    this.handlers = NO_HANDLERS;
    close();
  }
}
