/**
 * What a session sees of its connection, whatever the transport (raw WebSocket,
 * SockJS over WebSocket, SockJS polling): text messages in, encoded messages out.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { EncodedMessage } from '../ddp/encoded.js';
import { ProtocolErrors } from '../ddp/messages.js';

export interface SocketHandlers {
  /** One DDP message (a JSON text) from the client. */
  message(text: string): void;
  /** The transport refused something the client sent (too large, binary) and dropped it unread; `reason` is a DDP error reason. */
  refused(reason: string): void;
  /**
   * The connection ended. `abrupt`: the client went away without closing it
   * (a WebSocket without a close frame, a polling client that stopped), as a
   * lost network does; false when either side closed it on purpose.
   */
  close(abrupt: boolean): void;
  /**
   * Messages the socket was given left it: written, or dropped unwritten as it
   * closed (or was closed). Every message given to `send` is reported once, in
   * order; the array is the socket's and is never changed again.
   */
  sent(messages: EncodedMessage[], chars: number): void;
}

export interface DdpSocket {
  /** `websocket`, `sockjs-websocket` or `sockjs-<polling transport>`. */
  readonly transport: string;
  readonly remoteAddress: string | undefined;
  readonly remotePort: number | undefined;
  readonly headers: IncomingHttpHeaders;
  /**
   * Proxies of Perseid's own between the client and this socket, each of which
   * added itself to X-Forwarded-For (a workers' primary passing on SockJS
   * requests); counted on top of HTTP_FORWARDED_COUNT.
   */
  readonly ownProxies: number;
  /** Bytes queued for the client and not yet handed to the kernel, whatever the transport. */
  readonly bufferedBytes: number;
  /** False while the client has a high-water mark of output unread, or the server's output budget holds it back. */
  readonly writable: boolean;
  /** Resolves once `writable`, or when the connection closes, or after `timeoutMs`: which of them. */
  whenWritable(timeoutMs: number): Promise<'writable' | 'closed' | 'timeout'>;
  setHandlers(handlers: SocketHandlers): void;
  /** Queues a message; queued messages go out together at the end of the event-loop turn. */
  send(message: EncodedMessage): void;
  /** Sends what is queued, then closes. */
  close(code?: number, reason?: string): void;
  /** Drops the connection now, without waiting for the client (server shutdown). */
  terminate(): void;
  /** Inbound flow control: stop / restart reading from the client (no-op where the transport cannot). */
  pause(): void;
  resume(): void;
}

/** Hands one message of a SockJS frame or body to the session; one above the message limit gets a DDP error instead. */
export function handOnSockjsMessage(handlers: SocketHandlers, text: string, maxMessageSize: number): void {
  const bytes = Buffer.byteLength(text);
  if (bytes > maxMessageSize) handlers.refused(ProtocolErrors.messageTooLarge({ bytes, limit: maxMessageSize }));
  else handlers.message(text);
}
