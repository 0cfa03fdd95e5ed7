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
import { ProtocolErrors } from '../ddp/messages.js';
import type { Logger } from '../log.js';
import { BatchCache, scheduleFlush, type Flushable } from './flush.js';
import { frameFor, textFrame, type CompressionOptions, type FrameVariant } from './frames.js';
import type { BudgetMember, OutputBudget } from './output-budget.js';
import { OutputGate, type GateOutcome } from './output-gate.js';
import type { InputBudget, InputHolder } from './input-budget.js';
import { MessagePacer } from './message-pacer.js';
import { handOnSockjsMessage, type DdpSocket, type SocketHandlers } from './socket.js';
import { messageBytes } from '../metrics/message-size.js';
import { transportMetrics } from './transport-metrics.js';
import { upgradeOwnProxies } from './passed-on.js';

export interface WebSocketConnectionOptions {
  framing: 'raw' | 'sockjs';
  variant: FrameVariant;
  compression: CompressionOptions | undefined;
  maxMessageSize: number;
  /** Messages of SockJS frames that may wait to be handed on (the session's queue limit). */
  maxQueuedMessages: number;
  /** Outgoing bytes a client may leave unread before it is dropped as too slow. */
  maxBufferedBytes: number;
  /** Unread bytes at which the session stops building replies for this client until it reads. */
  outputHighWater: number;
  budget: OutputBudget;
  inputBudget: InputBudget;
  log: Logger;
}

/** A SockJS frame (over WebSocket or HTTP) that is not a JSON array of strings. */
export const BROKEN_FRAMING = defineCloseReason('BROKEN_FRAMING', 3000, 'Broken framing.');
/** The server failed unexpectedly while handling this connection (logged); other connections are unaffected. */
export const INTERNAL_ERROR = defineCloseReason('INTERNAL_ERROR', 1011, 'Internal error');

const NO_HANDLERS: SocketHandlers = { message: () => undefined, refused: () => undefined, close: () => undefined, sent: () => undefined };

function rawDataText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data instanceof ArrayBuffer ? new Uint8Array(data) : data).toString('utf8');
}

const kConnection = Symbol('perseid connection');
type CountedSocket = Duplex & { [kConnection]: WebSocketConnection };

/** One listener for every socket (a closure each would cost every idle connection its bytes). */
function countChunk(this: CountedSocket, chunk: Buffer): void {
  this[kConnection].received(chunk.length);
}

export class WebSocketConnection implements DdpSocket, Flushable, BudgetMember, InputHolder {
  // What send() and flush() read for every message and batch, declared first so that it shares the object's first cache lines.
  private closed = false;
  private pending: EncodedMessage[] = [];
  /** Characters of the queued messages (their frames are built at flush). */
  private pendingBytes = 0;
  /**
   * The kernel socket's queue as of our last write. It only drains until our
   * next write (what ws writes itself, pongs and close frames, is a few bytes),
   * so it bounds the queue from above: a send checks it, and reads the real one
   * only when it says the cap may be passed.
   */
  private written = 0;
  private readonly options: WebSocketConnectionOptions;
  private handlers = NO_HANDLERS;
  private readonly ws: WebSocket;
  private readonly socket: Duplex;
  private readonly gate: OutputGate;
  /** A SockJS frame's messages, handed on a slice per turn; reading waits meanwhile (made at the first frame: raw WebSockets need none). */
  private pacer: MessagePacer | undefined;
  /** Reading paused at the session's request (it may also be paused while the pacer holds messages). */
  private readingPaused = false;
  /** Bytes received since the last message completed: what `ws` holds of the next one (InputBudget). */
  heldBytes = 0;
  /** A message completed since the last chunk was counted. */
  private completed = false;

  readonly transport: string;
  readonly remoteAddress: string | undefined;
  readonly remotePort: number | undefined;
  readonly headers: IncomingMessage['headers'];
  /** 1 when another server's balancer passed the upgrade on (passed-on.ts); a workers' primary hands over the client's own socket. */
  readonly ownProxies: number;

  constructor(ws: WebSocket, socket: Duplex, request: IncomingMessage, options: WebSocketConnectionOptions) {
    this.ws = ws;
    this.socket = socket;
    this.options = options;
    this.transport = options.framing === 'raw' ? 'websocket' : 'sockjs-websocket';
    this.remoteAddress = request.socket.remoteAddress;
    this.remotePort = request.socket.remotePort;
    this.headers = request.headers;
    this.ownProxies = upgradeOwnProxies(request);
    this.gate = new OutputGate(() => this.bufferedBytes, options.outputHighWater);
    // Registered after ws's own listener: a chunk is counted once ws has parsed it.
    (socket as CountedSocket)[kConnection] = this;
    socket.on('data', countChunk);
    ws.on('message', (data, isBinary) => {
      this.messageCompleted();
      try {
        this.receive(data, isBinary);
      } catch (error) {
        this.failed(error);
      }
    });
    ws.on('close', (code) => this.closedByPeer(code));
    // ws reports the close only once it has handed on every message it had read, one per turn: up to thousands
    // from a client that pipelined them and left, each run for nobody meanwhile. The socket itself says at once.
    socket.on('close', () => this.closedByPeer(1006));
    // ws reports protocol violations (bad UTF-8, oversized or overly inflating messages) here and then closes.
    ws.on('error', (error) => options.log.debug('websocket error', { error: error.message, remote: this.remoteAddress }));
    socket.on('drain', () => {
      this.written = 0;
      this.gate.recheck();
    });
    options.budget.add(this);
    if (options.framing === 'sockjs') socket.write(textFrame('o'));
  }

  get bufferedBytes(): number {
    return this.socket.writableLength + this.pendingBytes;
  }

  get writable(): boolean {
    return this.gate.open;
  }

  whenWritable(timeoutMs: number): Promise<GateOutcome> {
    return this.gate.wait(timeoutMs);
  }

  hold(on: boolean): void {
    this.gate.hold(on);
  }

  dropOverBudget(): void {
    this.drop();
  }

  setHandlers(handlers: SocketHandlers): void {
    this.handlers = handlers;
  }

  send(message: EncodedMessage): void {
    if (this.closed) {
      this.handlers.sent([message], message.text.length);
      return;
    }
    const first = this.pending.push(message) === 1;
    this.pendingBytes += message.text.length;
    // `written` first: the kernel socket's own count is two more objects to touch for every message to every subscriber.
    if (this.written + this.pendingBytes > this.options.maxBufferedBytes && this.bufferedBytes > this.options.maxBufferedBytes) {
      this.dropSlow(this.bufferedBytes);
      return;
    }
    if (first) scheduleFlush(this);
  }

  flush(batches: BatchCache): void {
    if (this.pending.length === 0 || this.closed) return;
    const messages = this.handOver();
    // The peer's close frame has arrived and `ws` has answered it: nothing may follow a close frame.
    if (this.ws.readyState !== this.ws.OPEN) return;
    const { variant, compression } = this.options;
    const bytes =
      messages.length === 1
        ? frameFor(messages[0]!, variant, compression)
        : batches.join(messages, variant, (m) => frameFor(m, variant, compression));
    // Checked before writing: the cap holds for this batch too, not only after it.
    if (this.socket.writableLength + bytes.length > this.options.maxBufferedBytes) {
      this.dropSlow(this.socket.writableLength + bytes.length);
      return;
    }
    this.socket.write(bytes);
    this.written = this.socket.writableLength;
    transportMetrics.messagesSent.inc(messages.length);
    transportMetrics.bytesSent.inc(bytes.length);
    if (compression && variant !== 'plain' && variant !== 'sockjs') {
      let before = 0;
      for (let i = 0; i < messages.length; i++) before += messageBytes(messages[i]!);
      transportMetrics.compressionInput.inc(before);
      transportMetrics.compressionOutput.inc(bytes.length);
    }
    transportMetrics.writes.inc();
    if (this.socket.writableLength > 0) this.options.budget.changed();
    this.gate.recheck();
  }

  failed(error: unknown): void {
    this.options.log.error('unexpected failure on a connection; closing it', { remote: this.remoteAddress, error });
    transportMetrics.connectionErrors.inc();
    if (this.closed) return;
    this.handOver();
    this.closed = true;
    this.pacer?.clear();
    this.releasePartial();
    this.gate.close();
    this.options.budget.delete(this);
    this.ws.close(INTERNAL_ERROR.code, INTERNAL_ERROR.reason);
  }

  /** SockJS's keep-alive frame, for proxies that drop idle connections. */
  heartbeat(): void {
    if (!this.closed && this.options.framing === 'sockjs') this.socket.write(textFrame('h'));
  }

  close(code = 1000, reason = ''): void {
    if (this.closed) return;
    this.flush(new BatchCache());
    if (this.closed) return; // dropped by that flush
    this.closed = true;
    this.pacer?.clear();
    this.releasePartial();
    this.gate.close();
    this.options.budget.delete(this);
    if (this.options.framing === 'sockjs') {
      this.socket.write(textFrame(`c[${code === 1000 ? 3000 : code},${JSON.stringify(reason || 'Go away!')}]`));
      this.ws.close(1000);
    } else {
      this.ws.close(code, reason);
    }
    // Read again if the session had paused reading: the client's close frame (or its leaving) must be seen,
    // or ws waits 30 s for it; what else comes is ignored.
    this.ws.resume();
  }

  terminate(): void {
    this.drop();
  }

  pause(): void {
    this.readingPaused = true;
    this.ws.pause();
  }

  resume(): void {
    this.readingPaused = false;
    if (!this.pacer?.waiting) this.ws.resume();
  }

  private dropSlow(buffered: number): void {
    transportMetrics.slowClientsDropped.inc();
    this.options.log.warn('dropping a client that does not read its messages', { remote: this.remoteAddress, buffered });
    this.drop();
  }

  /** Takes the queued messages off the queue, reporting them as sent (see SocketHandlers.sent). */
  private handOver(): EncodedMessage[] {
    const messages = this.pending;
    this.pending = [];
    const chars = this.pendingBytes;
    this.pendingBytes = 0;
    if (messages.length > 0) this.handlers.sent(messages, chars);
    return messages;
  }

  private drop(): void {
    this.closed = true;
    this.pacer?.clear();
    this.releasePartial();
    this.handOver();
    this.gate.close();
    this.options.budget.delete(this);
    this.ws.terminate();
  }

  private receive(data: RawData, isBinary: boolean): void {
    if (this.closed) return;
    if (isBinary) {
      this.handlers.refused(ProtocolErrors.binaryFrame());
      return;
    }
    // `ws` has already refused anything above the frame limit (maxPayload), counted as it arrived.
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
    if (!messages.every((message) => typeof message === 'string')) {
      this.close(BROKEN_FRAMING.code, BROKEN_FRAMING.reason);
      return;
    }
    this.pacer ??= new MessagePacer({
      deliver: (text) => this.deliver(text),
      backlogged: (waiting) => {
        if (waiting) this.ws.pause();
        else if (!this.readingPaused) this.ws.resume();
      },
      overflow: () => this.overflowed(),
      maxWaiting: this.options.maxQueuedMessages,
    });
    for (const message of messages) this.pacer.push(message);
  }

  /** A chunk that ended a message leaves at most a chunk's tail of the next: only chunks that end none count. */
  received(bytes: number): void {
    if (this.completed) {
      this.completed = false;
      return;
    }
    if (this.closed) return;
    this.heldBytes += bytes;
    this.options.inputBudget.adjust(this, bytes);
  }

  private messageCompleted(): void {
    this.completed = true;
    this.releasePartial();
  }

  private releasePartial(): void {
    const held = this.heldBytes;
    if (held === 0) return;
    this.heldBytes = 0;
    this.options.inputBudget.adjust(this, -held);
  }

  dropOverInputBudget(): void {
    this.options.log.warn('dropping a client: the server holds too many bytes of incoming messages not yet complete', { remote: this.remoteAddress, held: this.heldBytes });
    this.drop();
  }

  private overflowed(): void {
    this.options.log.warn('dropping a client that sends faster than it can be served', { remote: this.remoteAddress, transport: this.transport });
    this.handlers.refused(ProtocolErrors.tooManyWaiting());
    this.close();
  }

  /** One message of a SockJS frame, in its turn. */
  private deliver(message: string): void {
    if (this.closed) return;
    try {
      handOnSockjsMessage(this.handlers, message, this.options.maxMessageSize);
    } catch (error) {
      this.failed(error);
    }
  }

  private closedByPeer(code: number): void {
    // 1006: no close frame came (the network or the client process went away); ours when this side closed first.
    const abrupt = !this.closed && code === 1006;
    this.closed = true;
    this.pacer?.clear();
    this.releasePartial();
    this.gate.close();
    this.options.budget.delete(this);
    this.handOver();
    const { close } = this.handlers;
    this.handlers = NO_HANDLERS;
    close(abrupt);
  }
}
