/**
 * A lean DDP-over-WebSocket client for load generation. It never parses the
 * server's messages: it scans the incoming bytes for the one string it is
 * waiting for (a message id, a document id). Hand-written because a full client
 * decodes every message of a broadcast to every simulated user, and then the
 * generator, not the server, is what gets measured.
 *
 * Frames it sends are masked with a zero key: legal (RFC 6455 only requires the
 * mask bit and a key), and it leaves the payload as is.
 */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';

export class LeanSocket {
  bytesIn = 0;
  lastSend = 0;
  private socket: Socket;
  private needle: Buffer | undefined;
  private tail: Buffer | undefined;
  private waiter: { resolve: () => void; reject: (e: Error) => void; timer: NodeJS.Timeout } | undefined;
  private closedError: Error | undefined;

  private constructor(socket: Socket) {
    this.socket = socket;
  }

  static open(host: string, port: number, path: string, timeoutMs: number): Promise<LeanSocket> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host, port, noDelay: true });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error('connect timeout'));
      }, timeoutMs);
      let head = Buffer.alloc(0);
      const onData = (chunk: Buffer) => {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end === -1) return;
        clearTimeout(timer);
        socket.off('data', onData);
        socket.off('error', onError);
        if (!head.subarray(0, 12).toString().includes('101')) {
          socket.destroy();
          reject(new Error(`upgrade refused: ${head.subarray(0, head.indexOf('\r\n')).toString()}`));
          return;
        }
        const lean = new LeanSocket(socket);
        lean.attach();
        const rest = head.subarray(end + 4);
        if (rest.length > 0) lean.receive(rest);
        resolve(lean);
      };
      const onError = (error: Error) => {
        clearTimeout(timer);
        reject(error);
      };
      socket.on('data', onData);
      socket.on('error', onError);
      socket.on('connect', () => {
        socket.write(
          `GET ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
            `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
        );
      });
    });
  }

  private attach(): void {
    this.socket.on('data', (chunk: Buffer) => this.receive(chunk));
    const closed = (error?: Error) => {
      this.closedError ??= error ?? new Error('connection closed by the server');
      this.fail(this.closedError);
    };
    this.socket.on('error', closed);
    this.socket.on('close', () => closed());
  }

  send(text: string): void {
    const payload = Buffer.from(text);
    const length = payload.length;
    const headerLength = length < 126 ? 6 : length < 65536 ? 8 : 14;
    const frame = Buffer.alloc(headerLength + length);
    frame[0] = 0x81;
    if (length < 126) frame[1] = 0x80 | length;
    else if (length < 65536) {
      frame[1] = 0x80 | 126;
      frame.writeUInt16BE(length, 2);
    } else {
      frame[1] = 0x80 | 127;
      frame.writeBigUInt64BE(BigInt(length), 2);
    }
    // The 4-byte masking key stays zero (Buffer.alloc), so the payload is copied unmasked.
    payload.copy(frame, headerLength);
    this.socket.write(frame);
    this.lastSend = Date.now();
  }

  /** Resolves when `text` next appears in what the server sends (bytes already seen do not count). */
  waitFor(text: string, timeoutMs: number): Promise<void> {
    if (this.closedError) return Promise.reject(this.closedError);
    return new Promise((resolve, reject) => {
      this.needle = Buffer.from(text);
      this.tail = undefined;
      const timer = setTimeout(() => this.fail(new Error(`timeout waiting for ${text}`)), timeoutMs);
      this.waiter = { resolve, reject, timer };
    });
  }

  close(): void {
    this.closedError ??= new Error('closed');
    this.socket.end();
    this.socket.destroy();
  }

  private receive(chunk: Buffer): void {
    this.bytesIn += chunk.length;
    const needle = this.needle;
    if (!needle) return;
    let found = chunk.indexOf(needle) !== -1;
    if (!found && this.tail) {
      // The needle may straddle two reads.
      const joint = Buffer.concat([this.tail, chunk.subarray(0, needle.length - 1)]);
      found = joint.indexOf(needle) !== -1;
    }
    if (found) {
      const waiter = this.waiter!;
      this.needle = this.tail = this.waiter = undefined;
      clearTimeout(waiter.timer);
      waiter.resolve();
      return;
    }
    this.tail = chunk.length >= needle.length - 1 ? chunk.subarray(chunk.length - (needle.length - 1)) : Buffer.concat([this.tail ?? Buffer.alloc(0), chunk]).subarray(-(needle.length - 1));
  }

  private fail(error: Error): void {
    const waiter = this.waiter;
    this.needle = this.tail = this.waiter = undefined;
    if (!waiter) return;
    clearTimeout(waiter.timer);
    waiter.reject(error);
  }
}
