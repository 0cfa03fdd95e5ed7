/**
 * The fuzz program's connections, one class per transport: a raw WebSocket
 * and a SockJS-framed WebSocket (frames written by hand over TCP, so they can
 * be binary, fragmented or cut short), and SockJS's xhr transport (batches of
 * messages per `xhr_send`, a poller beside them). Each sends what the
 * generator gives it until the shared budget runs out, reconnects whenever
 * the server closes it, and tallies what it sent and what came back.
 */
import { randomBytes } from 'node:crypto';
import { Agent } from 'node:http';
import type { Socket } from 'node:net';
import type { FrameGenerator} from './generate.js';
import { type FrameKind, type Generated } from './generate.js';
import { FrameReader, httpRequest, maskedFrame, OPCODE, openRawWebSocket, textFrame } from './wire.js';

export const TRANSPORTS = ['websocket', 'sockjs-websocket', 'sockjs-xhr'] as const;
export type TransportName = (typeof TRANSPORTS)[number];

/** Counts by name. */
export class Tally {
  readonly counts = new Map<string, number>();
  add(key: string, n = 1): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + n);
  }
  get(key: string): number {
    return this.counts.get(key) ?? 0;
  }
  total(prefix = ''): number {
    let n = 0;
    for (const [key, count] of this.counts) if (key.startsWith(prefix)) n += count;
    return n;
  }
}

/** What every connection counts into. */
export interface Tallies {
  /** `<transport> <kind>` */
  sent: Tally;
  /** `<msg>` of each DDP message back, and `error: <reason>` for errors */
  replies: Tally;
  /** `<transport> <close code>` */
  closes: Tally;
  /** `<status>` of each xhr_send */
  http: Tally;
}

/** How many frames may still be sent, and until when. Shared by every connection. */
export class Budget {
  private remaining: number;
  constructor(
    frames: number,
    readonly deadline: number,
  ) {
    this.remaining = frames;
  }
  get done(): boolean {
    return this.remaining <= 0 || Date.now() >= this.deadline;
  }
  take(n: number): number {
    if (this.done) return 0;
    const granted = Math.min(n, this.remaining);
    this.remaining -= granted;
    return granted;
  }
}

const CONNECT = JSON.stringify({ msg: 'connect', version: '1', support: ['1', 'pre2', 'pre1'] });
/** Frames per write on a WebSocket, and messages per xhr_send (which the server takes in one go: fewer, to keep the transports even). */
const BATCH = 50;
const XHR_BATCH = 10;
const MSG = /^\{"msg":"(\w+)"/;
const REASON = /"reason":"([^"]{0,80})/;

/** Counts one DDP message text from the server. */
function tallyReply(replies: Tally, text: string): void {
  const msg = MSG.exec(text)?.[1] ?? 'other';
  if (msg === 'error') replies.add(`error: ${(REASON.exec(text)?.[1] ?? '').replace(/\(\d+ bytes/, '(n bytes')}`);
  else replies.add(msg);
}

/** After a frame: the connection goes on, the server closes it, or the frame was cut short (the client ends it). */
type Ending = 'open' | 'closed' | 'cut';

/** Pings that end each batch, and their pongs (which are not counted as replies). */
class Markers {
  private n = 0;
  private readonly waiting = new Map<string, () => void>();

  next(): { ping: string; answered: Promise<void> } {
    const id = `mark-${++this.n}`;
    const answered = new Promise<void>((resolve) => this.waiting.set(id, resolve));
    return { ping: JSON.stringify({ msg: 'ping', id }), answered };
  }

  /** True (and the batch released) when `text` is a marker's pong. */
  seen(text: string): boolean {
    if (!text.startsWith('{"msg":"pong","id":"mark-')) return false;
    const id = (JSON.parse(text) as { id: string }).id;
    this.waiting.get(id)?.();
    this.waiting.delete(id);
    return true;
  }
}

export interface FuzzTarget {
  port: number;
  maxMessageSize: number;
}

/** A WebSocket written frame by frame: raw (`/websocket`) or SockJS-framed. */
export class WebSocketFuzzer {
  readonly transport: TransportName;

  constructor(
    private readonly target: FuzzTarget,
    private readonly framing: 'raw' | 'sockjs',
    private readonly generator: FrameGenerator,
    private readonly tallies: Tallies,
  ) {
    this.transport = framing === 'raw' ? 'websocket' : 'sockjs-websocket';
  }

  async run(budget: Budget): Promise<void> {
    while (!budget.done) {
      const path = this.framing === 'raw' ? '/websocket' : `/sockjs/${Math.floor(Math.random() * 999)}/${randomBytes(6).toString('hex')}/websocket`;
      let socket: Socket;
      try {
        const opened = await openRawWebSocket(this.target.port, path);
        if (!opened.response.startsWith('HTTP/1.1 101')) {
          this.tallies.closes.add(`${this.transport} refused ${opened.response.split(' ')[1]}`);
          opened.socket.destroy();
          await new Promise((r) => setTimeout(r, 100));
          continue;
        }
        socket = opened.socket;
        this.read(socket, opened.rest);
      } catch (error) {
        this.tallies.closes.add(`${this.transport} could not connect (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      await this.drive(socket, budget);
      socket.destroy();
    }
  }

  private read(socket: Socket, rest: Buffer): void {
    const reader = new FrameReader();
    // A SockJS close frame (`c[code,reason]`) is followed by a WebSocket close: count the first only.
    let counted = false;
    const onData = (chunk: Buffer) => {
      for (const frame of reader.push(chunk)) {
        if (frame.opcode === OPCODE.close) {
          if (!counted) this.tallies.closes.add(`${this.transport} ${frame.payload.length >= 2 ? frame.payload.readUInt16BE(0) : 'no code'}`);
          counted = true;
          socket.end(); // rather than answer the close frame: the server may then drop the connection at once
          continue;
        }
        if (frame.opcode !== OPCODE.text) continue;
        const text = frame.payload.toString();
        if (this.framing === 'raw') this.reply(text);
        else if (text.startsWith('a')) for (const m of JSON.parse(text.slice(1)) as string[]) this.reply(m);
        else if (text.startsWith('c') && !counted) {
          this.tallies.closes.add(`${this.transport} ${(JSON.parse(text.slice(1)) as [number])[0]}`);
          counted = true;
        }
      }
    };
    socket.on('data', onData);
    socket.on('error', () => undefined);
    if (rest.length) onData(rest);
    socket.resume();
  }

  private readonly markers = new Markers();

  private reply(text: string): void {
    if (!this.markers.seen(text)) tallyReply(this.tallies.replies, text);
  }

  /**
   * Sends batches until the budget is spent or the server closes this
   * connection. Each batch ends with a ping whose pong is awaited, so what is
   * counted as sent is what the server read; a frame that closes the
   * connection (invalid UTF-8, a frame cut short, too large, broken SockJS
   * framing) ends its batch.
   */
  private async drive(socket: Socket, budget: Budget): Promise<void> {
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    let open = true;
    void closed.then(() => (open = false));
    socket.write(this.wrap(CONNECT));
    while (open && !budget.done) {
      const frames: Buffer[] = [];
      let ending: Ending = 'open';
      for (let i = 0; i < BATCH && ending === 'open' && budget.take(1); i++) {
        const generated = this.generator.next();
        this.tallies.sent.add(`${this.transport} ${generated.kind}`);
        const [bytes, end] = this.framesOf(generated);
        frames.push(...bytes);
        ending = end;
      }
      const marker = ending === 'open' ? this.markers.next() : undefined;
      if (marker) frames.push(this.wrap(marker.ping));
      socket.write(Buffer.concat(frames));
      if (ending !== 'open') {
        // A frame cut short the server can only give up on when the connection goes; the others it closes on.
        if (ending === 'cut') socket.end();
        await Promise.race([closed, new Promise((r) => setTimeout(r, 2000))]);
        break;
      }
      await Promise.race([marker!.answered, closed, new Promise((r) => setTimeout(r, 10000))]);
    }
  }

  /** The frames for one generated message, and how the connection fares after them. */
  private framesOf(generated: Generated): [Buffer[], Ending] {
    if (generated.kind === 'binary') return [[maskedFrame(OPCODE.binary, generated.bytes!, {}, true)], 'open'];
    if (generated.bytes) return [[maskedFrame(OPCODE.text, generated.bytes, {}, true)], 'closed']; // invalid UTF-8: 1007
    const text = generated.text!;
    // Garbage on a SockJS framing is sometimes not even the array of strings it must be.
    if (this.framing === 'sockjs' && generated.kind === 'garbage' && Math.random() < 0.2) return [[textFrame(text, {}, true)], 'closed'];
    const frame = this.wrap(text);
    if (generated.kind === 'oversized') return [[frame], this.framing === 'raw' || frame.length > 2 * this.target.maxMessageSize ? 'closed' : 'open'];
    if (generated.kind !== 'partial') return [[frame], 'open'];
    const roll = Math.random();
    if (roll < 0.05) return [[frame.subarray(0, Math.max(1, frame.length >> 1))], 'cut'];
    if (roll < 0.5) return [[frame], 'open']; // truncated text in a whole frame
    // The message as fragments: a text frame and a final continuation.
    const payload = Buffer.from(this.framing === 'raw' ? text : JSON.stringify([text]));
    const middle = payload.length >> 1;
    return [[maskedFrame(OPCODE.text, payload.subarray(0, middle), { fin: false }, true), maskedFrame(OPCODE.continuation, payload.subarray(middle), { fin: true }, true)], 'open'];
  }

  private wrap(text: string): Buffer {
    return textFrame(this.framing === 'raw' ? text : JSON.stringify([text]), {}, true);
  }
}

/** SockJS's xhr transport: messages posted in batches, replies collected by a poller. */
export class XhrFuzzer {
  readonly transport: TransportName = 'sockjs-xhr';
  /** Keep-alive connections of the current session (a poll and a send at a time). */
  private agent = new Agent({ keepAlive: true, maxSockets: 2 });

  constructor(
    private readonly target: FuzzTarget,
    private readonly generator: FrameGenerator,
    private readonly tallies: Tallies,
  ) {}

  async run(budget: Budget): Promise<void> {
    while (!budget.done) {
      this.agent = new Agent({ keepAlive: true, maxSockets: 2 });
      try {
        await this.session(budget);
      } finally {
        // Ends a poll still waiting for data (a long poll lasts up to the heartbeat, 45 s).
        this.agent.destroy();
      }
    }
  }

  private async session(budget: Budget): Promise<void> {
    const base = `/sockjs/${Math.floor(Math.random() * 999)}/${randomBytes(6).toString('hex')}`;
    const opened = await httpRequest(this.target.port, 'POST', `${base}/xhr`, '', {}, this.agent).catch(() => undefined);
    if (!opened || !opened.body.startsWith('o')) {
      this.tallies.closes.add(`${this.transport} could not open (${opened?.status ?? 'no answer'})`);
      await new Promise((r) => setTimeout(r, 100));
      return;
    }
    let open = true;
    const markers = new Markers();
    const polling = this.poll(base, markers, () => open).then(() => (open = false));
    await this.post(base, [CONNECT]);
    while (open && !budget.done) {
      const messages: string[] = [];
      let body: string | undefined;
      for (let i = 0; i < XHR_BATCH && body === undefined && budget.take(1); i++) {
        const generated = this.generator.next();
        this.tallies.sent.add(`${this.transport} ${generated.kind}`);
        messages.push(generated.text ?? generated.bytes!.toString('latin1'));
        // A body cut short (500), or one that may be too large (413), ends the batch: no marker comes back.
        if (generated.kind === 'partial' && Math.random() < 0.05) body = JSON.stringify(messages).slice(0, -3);
        else if (generated.kind === 'oversized') body = JSON.stringify(messages);
      }
      const marker = body === undefined ? markers.next() : undefined;
      if (marker) messages.push(marker.ping);
      const status = await this.post(base, body ?? messages);
      if (status === 404) break; // the session is gone (closed by the server)
      if (marker && status === 204) await Promise.race([marker.answered, polling, new Promise((r) => setTimeout(r, 10000))]);
    }
    open = false;
    // The replies to the last batch, if they come soon.
    await Promise.race([polling, new Promise((r) => setTimeout(r, 1000))]);
  }

  /** Posts one xhr_send (an array of messages, or a body as it is); returns its status. */
  private async post(base: string, body: string[] | string): Promise<number> {
    const text = typeof body === 'string' ? body : JSON.stringify(body);
    const reply = await httpRequest(this.target.port, 'POST', `${base}/xhr_send`, text, { 'content-type': 'text/plain' }, this.agent).catch(() => undefined);
    const status = reply?.status ?? 0;
    this.tallies.http.add(String(status));
    return status;
  }

  /** Polls until the session closes (or `running` turns false after the last batch). */
  private async poll(base: string, markers: Markers, running: () => boolean): Promise<void> {
    for (;;) {
      const reply = await httpRequest(this.target.port, 'POST', `${base}/xhr`, '', {}, this.agent).catch(() => undefined);
      if (!reply || reply.status !== 200) return;
      const frame = reply.body.trim();
      if (frame.startsWith('a')) for (const m of JSON.parse(frame.slice(1)) as string[]) if (!markers.seen(m)) tallyReply(this.tallies.replies, m);
      else if (frame.startsWith('c')) {
        this.tallies.closes.add(`${this.transport} ${(JSON.parse(frame.slice(1)) as [number])[0]}`);
        return;
      }
      if (!running()) return;
    }
  }
}

export type Fuzzer = WebSocketFuzzer | XhrFuzzer;

export function fuzzerFor(transport: TransportName, target: FuzzTarget, generator: FrameGenerator, tallies: Tallies): Fuzzer {
  if (transport === 'sockjs-xhr') return new XhrFuzzer(target, generator, tallies);
  return new WebSocketFuzzer(target, transport === 'websocket' ? 'raw' : 'sockjs', generator, tallies);
}

export type { FrameKind };
