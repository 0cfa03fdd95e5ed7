/**
 * A DDP connection over one of SockJS's HTTP transports (xhr-polling, streaming,
 * jsonp, eventsource), served by the `sockjs` package. These are the fallbacks
 * of browsers without WebSockets; sockjs buffers and frames per session itself.
 */
import type { Connection } from 'sockjs';
import type { EncodedMessage } from '../ddp/encoded.js';
import type { DdpSocket, SocketHandlers } from './socket.js';
import { transportMetrics } from './transport-metrics.js';

export class SockjsConnection implements DdpSocket {
  readonly transport: string;
  readonly remoteAddress: string | undefined;
  readonly remotePort: number | undefined;
  readonly headers: Record<string, string>;
  private handlers: SocketHandlers | undefined;
  private closed = false;

  constructor(
    private readonly conn: Connection,
    private readonly maxMessageSize: number,
  ) {
    this.transport = `sockjs-${conn.protocol}`;
    this.remoteAddress = conn.remoteAddress;
    this.remotePort = conn.remotePort;
    this.headers = conn.headers;
    conn.on('data', (text: string) => {
      if (!this.handlers) return;
      if (Buffer.byteLength(text) > this.maxMessageSize) this.handlers.oversize(Buffer.byteLength(text));
      else this.handlers.message(text);
    });
    conn.on('close', () => {
      this.closed = true;
      this.handlers?.close();
      this.handlers = undefined;
    });
  }

  get bufferedBytes(): number {
    return 0;
  }

  setHandlers(handlers: SocketHandlers): void {
    this.handlers = handlers;
  }

  send(message: EncodedMessage): void {
    if (this.closed) return;
    this.conn.write(message.text);
    transportMetrics.messagesSent.inc();
  }

  close(code = 3000, reason = 'Go away!'): void {
    if (this.closed) return;
    this.closed = true;
    this.conn.close(String(code), reason);
  }

  terminate(): void {
    this.close();
    // A polling session otherwise waits disconnect_delay (60 s) for the client to
    // collect the close frame, holding a timer; sockjs 0.3 offers no public way to
    // end it, so its session's own timeout handler is called.
    (this.conn as unknown as { _session?: { didTimeout?(): void } })._session?.didTimeout?.();
  }

  // HTTP polling has no stream to pause; its requests are bounded by the client's own pacing.
  pause(): void {}
  resume(): void {}
}
