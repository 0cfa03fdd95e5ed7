/**
 * Clients that speak the wire by hand, for the fuzz program and the hostile-input
 * tests: WebSocket frames written byte by byte over TCP (fragments, partial
 * frames, compressed or binary frames, clients that never read), and SockJS's
 * xhr transport as plain HTTP requests. Library clients would refuse to send
 * most of what these must send.
 */
import { randomBytes } from 'node:crypto';
import { request, type Agent } from 'node:http';
import { connect, type Socket } from 'node:net';

export const OPCODE = { continuation: 0x0, text: 0x1, binary: 0x2, close: 0x8, ping: 0x9 } as const;

export interface FrameFlags {
  /** Last fragment of the message (default true). */
  fin?: boolean;
  /** permessage-deflate's "compressed" bit. */
  rsv1?: boolean;
}

const ZERO_MASK = Buffer.alloc(4);

/**
 * One client-to-server frame, masked as RFC 6455 requires of clients: with a
 * random key, or with `fast` an all-zero key (still valid: the payload then
 * needs no XOR, which matters at a million frames).
 */
export function maskedFrame(opcode: number, payload: Buffer, flags: FrameFlags = {}, fast = false): Buffer {
  const first = (flags.fin === false ? 0 : 0x80) | (flags.rsv1 ? 0x40 : 0) | opcode;
  const length = payload.length;
  const header = length < 126 ? Buffer.from([first, 0x80 | length]) : length < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
  if (length >= 126) {
    header[0] = first;
    if (length < 65536) {
      header[1] = 0x80 | 126;
      header.writeUInt16BE(length, 2);
    } else {
      header[1] = 0x80 | 127;
      header.writeBigUInt64BE(BigInt(length), 2);
    }
  }
  if (fast) return Buffer.concat([header, ZERO_MASK, payload]);
  const mask = randomBytes(4);
  const masked = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) masked[i] = payload[i]! ^ mask[i & 3]!;
  return Buffer.concat([header, mask, masked]);
}

export function textFrame(text: string, flags: FrameFlags = {}, fast = false): Buffer {
  return maskedFrame(OPCODE.text, Buffer.from(text), flags, fast);
}

export interface ServerFrame {
  opcode: number;
  /** RSV1: the payload is compressed (permessage-deflate). */
  rsv1: boolean;
  payload: Buffer;
  /** The whole frame as it came, header included. */
  raw: Buffer;
}

/** Splits server frames (unmasked) out of a byte stream. */
export class FrameReader {
  private buffer: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): ServerFrame[] {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
    const frames: ServerFrame[] = [];
    for (;;) {
      if (this.buffer.length < 2) break;
      let length = this.buffer[1]! & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (this.buffer.length < 4) break;
        length = this.buffer.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (this.buffer.length < 10) break;
        length = Number(this.buffer.readBigUInt64BE(2));
        offset = 10;
      }
      if (this.buffer.length < offset + length) break;
      frames.push({
        opcode: this.buffer[0]! & 0x0f,
        rsv1: (this.buffer[0]! & 0x40) !== 0,
        payload: this.buffer.subarray(offset, offset + length),
        raw: this.buffer.subarray(0, offset + length),
      });
      this.buffer = this.buffer.subarray(offset + length);
    }
    return frames;
  }
}

export interface RawSocket {
  socket: Socket;
  /** The status line and headers of the server's answer. */
  response: string;
  /** Bytes after the answer's headers (the first frames). */
  rest: Buffer;
}

/**
 * Opens a TCP connection and asks for a WebSocket upgrade of `path`;
 * resolves with the server's answer (101 or a refusal), the socket paused.
 */
export function openRawWebSocket(port: number, path = '/websocket', headers: Record<string, string> = {}, host = '127.0.0.1'): Promise<RawSocket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) return;
      socket.off('data', onData);
      socket.off('error', reject);
      socket.pause();
      resolve({ socket, response: head.subarray(0, end).toString(), rest: head.subarray(end + 4) });
    };
    socket.on('data', onData);
    socket.on('error', reject);
    socket.on('connect', () => {
      const all: Record<string, string> = {
        Host: `${host}:${port}`,
        Upgrade: 'websocket',
        Connection: 'Upgrade',
        'Sec-WebSocket-Key': randomBytes(16).toString('base64'),
        'Sec-WebSocket-Version': '13',
        ...headers,
      };
      socket.write(`GET ${path} HTTP/1.1\r\n${Object.entries(all).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`);
    });
  });
}

export interface HttpReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One HTTP request with a body given whole (Content-Length) or as chunks (chunked encoding). */
export function httpRequest(
  port: number,
  method: string,
  path: string,
  body?: string | Buffer | AsyncIterable<Buffer>,
  headers: Record<string, string> = {},
  agent?: Agent,
): Promise<HttpReply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers, ...(agent ? { agent } : {}) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (body === undefined || typeof body === 'string' || Buffer.isBuffer(body)) {
      req.end(body);
      return;
    }
    void (async () => {
      try {
        for await (const chunk of body) {
          if (req.destroyed) return;
          if (!req.write(chunk)) await new Promise((r) => req.once('drain', r));
        }
        req.end();
      } catch {
        req.destroy();
      }
    })();
  });
}

/** SockJS's xhr-polling transport by hand: `xhr` opens and polls, `xhr_send` posts messages. */
export class SockjsXhrSession {
  private constructor(
    readonly port: number,
    readonly base: string,
    readonly headers: Record<string, string>,
  ) {}

  /** Opens a session; resolves once the server has answered `o`. */
  static async open(port: number, headers: Record<string, string> = {}): Promise<SockjsXhrSession> {
    const session = new SockjsXhrSession(port, `/sockjs/${Math.floor(Math.random() * 1000)}/${randomBytes(8).toString('hex')}`, headers);
    const opened = await httpRequest(port, 'POST', `${session.base}/xhr`, '', headers);
    if (opened.status !== 200 || !opened.body.startsWith('o')) throw new Error(`SockJS xhr open answered ${opened.status} ${opened.body}`);
    return session;
  }

  /** Posts `messages` (DDP texts, or anything for a malformed body) in one xhr_send. */
  send(messages: unknown[] | string): Promise<HttpReply> {
    const body = typeof messages === 'string' ? messages : JSON.stringify(messages);
    return httpRequest(this.port, 'POST', `${this.base}/xhr_send`, body, { 'content-type': 'text/plain', ...this.headers });
  }

  /** One poll: the frames the server had (`a[...]` messages, `h`, `c[...]`). */
  async poll(): Promise<{ messages: string[]; closed?: [number, string] }> {
    const reply = await httpRequest(this.port, 'POST', `${this.base}/xhr`, '', this.headers);
    const frame = reply.body.trim();
    if (frame.startsWith('a')) return { messages: JSON.parse(frame.slice(1)) as string[] };
    if (frame.startsWith('c')) return { messages: [], closed: JSON.parse(frame.slice(1)) as [number, string] };
    return { messages: [] };
  }
}
