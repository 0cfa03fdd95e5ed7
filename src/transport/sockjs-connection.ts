/**
 * A DDP connection over one of SockJS's HTTP transports (xhr-polling, streaming,
 * jsonp, eventsource), served by the `sockjs` package. These are the fallbacks
 * of browsers without WebSockets; sockjs buffers and frames per session itself.
 *
 * Its buffer is bounded like a WebSocket's: what waits in the session for the
 * client's next poll, plus what the open response has not handed to the
 * kernel, counts against `maxBufferedBytes` and the server's output budget.
 * sockjs 0.3 exposes neither figure, so they are read from its session object.
 */
import type { Connection } from 'sockjs';
import type { EncodedMessage } from '../ddp/encoded.js';
import { ProtocolErrors } from '../ddp/messages.js';
import type { Logger } from '../log.js';
import type { BudgetMember, OutputBudget } from './output-budget.js';
import { OutputGate, type GateOutcome } from './output-gate.js';
import { MessagePacer } from './message-pacer.js';
import { handOnSockjsMessage, type DdpSocket, type SocketHandlers } from './socket.js';
import { messageBytes } from '../metrics/message-size.js';
import { transportMetrics } from './transport-metrics.js';
import { BROKEN_FRAMING, INTERNAL_ERROR } from './websocket-connection.js';

export interface SockjsConnectionOptions {
  maxMessageSize: number;
  /** Messages of `xhr_send` bodies that may wait to be handed on (the session's queue limit). */
  maxQueuedMessages: number;
  maxBufferedBytes: number;
  outputHighWater: number;
  budget: OutputBudget;
  /** See DdpSocket.ownProxies. */
  ownProxies: number;
  log: Logger;
}

/** The parts of sockjs 0.3's session this class reads. */
interface SockjsSession {
  /** 3 once closed for good. */
  readyState: number;
  send_buffer: string[];
  recv?: { response?: { writableLength?: number } | null } | null;
  didTimeout?(): void;
  /** How long it outlives its last request (set from the server's disconnect_delay). */
  disconnect_delay: number;
  to_tref: ReturnType<typeof setTimeout> | null;
  timeout_cb(): void;
}

/**
 * How long a closed polling session waits for its client to collect the close
 * frame. sockjs keeps it disconnect_delay (60 s) otherwise: a flood of sessions
 * refused over the per-address limit held a gigabyte that way.
 */
const CLOSED_LINGER_MS = 2000;

/** Polling transports have no drain event: a waiting session looks again this often. */
const POLL_MS = 50;

export class SockjsConnection implements DdpSocket, BudgetMember {
  readonly transport: string;
  readonly remoteAddress: string | undefined;
  readonly remotePort: number | undefined;
  readonly headers: Record<string, string>;
  readonly ownProxies: number;
  private handlers: SocketHandlers | undefined;
  private closed = false;
  /** Characters written into the session's buffer since it was last empty. */
  private queued = 0;
  private readonly gate: OutputGate;
  /** The messages of a body, handed on a slice per turn (HTTP has no reading to pause). */
  private readonly pacer: MessagePacer;

  constructor(
    private readonly conn: Connection,
    private readonly options: SockjsConnectionOptions,
  ) {
    this.transport = `sockjs-${conn.protocol}`;
    this.remoteAddress = conn.remoteAddress;
    this.remotePort = conn.remotePort;
    this.headers = conn.headers;
    this.ownProxies = options.ownProxies;
    this.gate = new OutputGate(() => this.bufferedBytes, options.outputHighWater, POLL_MS);
    this.pacer = new MessagePacer({
      deliver: (text) => this.deliver(text),
      backlogged: () => undefined,
      overflow: () => {
        options.log.warn('dropping a client that sends faster than it can be served', { remote: this.remoteAddress, transport: this.transport });
        this.handlers?.refused(ProtocolErrors.tooManyWaiting());
        this.close();
      },
      maxWaiting: options.maxQueuedMessages,
    });
    // sockjs calls this from its request handlers: an exception here would escape them.
    conn.on('data', (text: unknown) => {
      try {
        this.receive(text);
      } catch (error) {
        this.failed(error);
      }
    });
    conn.on('close', () => {
      // Polling transports cannot tell a client that left from one that lost its network: either is abrupt unless this side closed.
      const abrupt = !this.closed;
      this.closed = true;
      this.gate.close();
      options.budget.delete(this);
      this.handlers?.close(abrupt);
      this.handlers = undefined;
    });
    options.budget.add(this);
  }

  private get session(): SockjsSession | undefined {
    return (this.conn as unknown as { _session?: SockjsSession })._session;
  }

  get bufferedBytes(): number {
    const session = this.session;
    if (!session) return 0;
    if (session.send_buffer.length === 0) this.queued = 0;
    return this.queued + (session.recv?.response?.writableLength ?? 0);
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
    this.terminate();
  }

  setHandlers(handlers: SocketHandlers): void {
    this.handlers = handlers;
  }

  send(message: EncodedMessage): void {
    // Reported first: written or dropped, it has left the session.
    this.handlers?.sent([message], message.text.length);
    if (this.closed) return;
    const buffered = this.bufferedBytes + message.text.length;
    if (buffered > this.options.maxBufferedBytes) {
      transportMetrics.slowClientsDropped.inc();
      this.options.log.warn('dropping a client that does not read its messages', { remote: this.remoteAddress, transport: this.transport, buffered });
      this.terminate();
      return;
    }
    if (this.session?.send_buffer.length === 0) this.queued = 0;
    this.queued += message.text.length;
    this.conn.write(message.text);
    transportMetrics.messagesSent.inc();
    transportMetrics.bytesSent.inc(messageBytes(message));
    this.options.budget.changed();
  }

  close(code = 3000, reason = 'Go away!'): void {
    if (this.closed) return;
    this.closed = true;
    this.pacer.clear();
    this.gate.close();
    this.options.budget.delete(this);
    const session = this.session;
    if (session) session.disconnect_delay = CLOSED_LINGER_MS;
    // The close frame carries the code as given: a number, as the SockJS protocol has it (the typings say string).
    this.conn.close(code as unknown as string, reason);
    // No request waits: the timer set when the last one ended still counts the old delay.
    if (session && !session.recv && session.to_tref && session.readyState !== 3) {
      clearTimeout(session.to_tref);
      session.to_tref = setTimeout(session.timeout_cb, CLOSED_LINGER_MS);
    }
  }

  terminate(): void {
    const session = this.session;
    this.close();
    // A polling session otherwise waits disconnect_delay (60 s) for the client to
    // collect the close frame, holding a timer and its unsent buffer; sockjs 0.3
    // offers no public way to end it, so its session's own timeout handler is called.
    if (session) {
      session.send_buffer = [];
      if (!session.recv && session.readyState !== 3) session.didTimeout?.();
    }
  }

  // HTTP polling has no stream to pause; a client past the queue limit is dropped instead.
  pause(): void {}
  resume(): void {}

  private receive(text: unknown): void {
    if (!this.handlers || this.closed) return;
    // sockjs passes on whatever the JSON array of an xhr_send held.
    if (typeof text !== 'string') {
      this.close(BROKEN_FRAMING.code, BROKEN_FRAMING.reason);
      return;
    }
    this.pacer.push(text);
  }

  /** One message of a body, in its turn. */
  private deliver(text: string): void {
    if (!this.handlers || this.closed) return;
    try {
      handOnSockjsMessage(this.handlers, text, this.options.maxMessageSize);
    } catch (error) {
      this.failed(error);
    }
  }

  private failed(error: unknown): void {
    this.options.log.error('unexpected failure on a connection; closing it', { remote: this.remoteAddress, transport: this.transport, error });
    transportMetrics.connectionErrors.inc();
    this.close(INTERNAL_ERROR.code, INTERNAL_ERROR.reason);
  }
}
