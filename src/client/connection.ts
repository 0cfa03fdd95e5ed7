/**
 * One WebSocket connection to a DDP server: frames, the `connect` handshake,
 * the connect timeout and heartbeats. Reconnecting is the client's business; a
 * Connection ends exactly once and then never calls its handlers again.
 */
import { toJSONValue } from '../ddp/ejson.js';
import { parseServerMessage, type ClientMessage, type ServerMessage } from '../ddp/messages.js';
import { Heartbeat } from './heartbeat.js';

/**
 * The part of the WebSocket API the client uses; the browser's WebSocket and the
 * `ws` package both have it. Event handler parameters are `never` so that either
 * implementation's own event types are accepted.
 */
export interface WebSocketLike {
  readonly readyState: number;
  onopen: ((event: never) => void) | null;
  onmessage: ((event: never) => void) | null;
  onclose: ((event: never) => void) | null;
  onerror: ((event: never) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  /** `ws` only: drops the socket without a closing handshake, for a peer presumed dead. */
  terminate?(): void;
}

export type WebSocketConstructor = new (url: string) => WebSocketLike;

export interface ConnectionSettings {
  url: string;
  WebSocket: WebSocketConstructor;
  /** The version proposed in `connect`. */
  version: string;
  /** Every version the client speaks, most preferred first. */
  support: readonly string[];
  /** The session to ask to resume, and how many of its messages arrived (Meteor 3.5's resumption). */
  resume?: { session: string; receivedCount: number };
  connectTimeout: number;
  heartbeatInterval: number;
  heartbeatTimeout: number;
}

export interface ConnectionHandlers {
  /** Every DDP message received, handshake ones included. */
  message(message: ServerMessage): void;
  connected(session: string): void;
  /** The server wants another version; the connection has ended. */
  failed(version: string): void;
  /** The connection ended for any other reason than {@link Connection.close}. */
  lost(reason: string, code?: number): void;
  error(error: Error): void;
}

const ignore = (): void => undefined;

/** Only `params` is EJSON in what a client sends (DDP notes §1.1). */
function encode(message: ClientMessage): string {
  return JSON.stringify('params' in message ? { ...message, params: toJSONValue(message.params) } : message);
}

function connectMessage({ version, support, resume }: ConnectionSettings): ClientMessage {
  const message: ClientMessage = { msg: 'connect', version, support: [...support] };
  if (resume) Object.assign(message, resume);
  return message;
}

function socketError(event: unknown): Error {
  const cause = (event as { error?: unknown } | null)?.error;
  return cause instanceof Error ? cause : new Error('WebSocket error');
}

export class Connection {
  private readonly socket: WebSocketLike | undefined;
  private phase: 'handshake' | 'connected' | 'ended' = 'handshake';
  private connectTimer: ReturnType<typeof setTimeout> | undefined;
  private heartbeat: Heartbeat | undefined;

  constructor(
    private readonly settings: ConnectionSettings,
    private readonly handlers: ConnectionHandlers,
  ) {
    try {
      this.socket = new settings.WebSocket(settings.url);
    } catch (error) {
      // Report on a later tick, as a failed socket would: the client is still setting up.
      queueMicrotask(() => {
        if (this.phase === 'ended') return;
        handlers.error(error instanceof Error ? error : new Error(String(error)));
        this.end('WebSocket could not be created');
      });
      return;
    }
    this.socket.onopen = () => this.send(connectMessage(settings));
    this.socket.onmessage = (event: { data: unknown }) => this.receive(event.data);
    this.socket.onclose = (event: { code: number; reason: string }) =>
      this.end(event.reason || 'connection closed', event.code);
    this.socket.onerror = (event: unknown) => handlers.error(socketError(event));
    this.connectTimer = setTimeout(() => this.end('connect timeout', undefined, true), settings.connectTimeout);
  }

  send(message: ClientMessage): void {
    this.socket?.send(encode(message));
  }

  /** Ends the connection without reporting it. */
  close(): void {
    if (this.phase !== 'ended') this.shutDown(false);
  }

  private receive(data: unknown): void {
    // Any frame is a sign of life.
    this.heartbeat?.messageReceived();
    // DDP is text only; a binary frame is not a DDP message.
    if (typeof data !== 'string') return;
    let message: ServerMessage | undefined;
    try {
      message = parseServerMessage(data);
    } catch (error) {
      this.handlers.error(new Error(`Undecodable message from the server: ${(error as Error).message}`));
      return;
    }
    if (!message) return;
    try {
      this.handlers.message(message);
    } catch (error) {
      // A malformed message (say, `ready` without `subs`) must not take the client down.
      this.handlers.error(new Error(`Could not process a '${message.msg}' message: ${(error as Error).message}`));
    }
    switch (message.msg) {
      case 'ping':
        if (this.phase === 'ended') break;
        this.send(message.id === undefined ? { msg: 'pong' } : { msg: 'pong', id: message.id });
        break;
      case 'connected':
        if (this.phase === 'handshake') this.connected(message.session);
        break;
      case 'failed':
        if (this.phase === 'handshake') {
          this.shutDown(false);
          this.handlers.failed(message.version);
        }
        break;
    }
  }

  private connected(session: string): void {
    this.phase = 'connected';
    clearTimeout(this.connectTimer);
    const { heartbeatInterval, heartbeatTimeout, version } = this.settings;
    // DDP pre1 has no ping/pong.
    if (heartbeatInterval > 0 && version !== 'pre1') {
      this.heartbeat = new Heartbeat(
        heartbeatInterval,
        heartbeatTimeout,
        () => this.send({ msg: 'ping' }),
        () => this.end('heartbeat timeout', undefined, true),
      );
    }
    this.handlers.connected(session);
  }

  private end(reason: string, code?: number, peerUnresponsive = false): void {
    if (this.phase === 'ended') return;
    this.shutDown(peerUnresponsive);
    this.handlers.lost(reason, code);
  }

  private shutDown(peerUnresponsive: boolean): void {
    this.phase = 'ended';
    clearTimeout(this.connectTimer);
    this.heartbeat?.stop();
    const socket = this.socket;
    if (!socket) return;
    socket.onopen = socket.onmessage = socket.onclose = null;
    // `ws` turns an 'error' event without a listener into an uncaught exception (it
    // emits one when closed while connecting), so a no-op stays attached.
    socket.onerror = ignore;
    if (peerUnresponsive && socket.terminate) socket.terminate();
    else socket.close();
  }
}
