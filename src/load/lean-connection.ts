/**
 * A DDP connection for load generation that decodes almost nothing. It walks
 * the WebSocket frame headers of what the server sends (to count messages and
 * answer pings) and looks for awaited strings in the raw bytes; only a message
 * someone asked to read (a method's result) is parsed. A full client decodes
 * every message of every broadcast for every simulated user, and then the
 * generator, not the server, is what gets measured.
 *
 * Frames sent are masked with a zero key: legal (RFC 6455 requires the mask bit
 * and a key, not a random one), and the payload is then copied as is.
 */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';

export interface LeanCounters {
  messagesIn: number;
  bytesIn: number;
  messagesOut: number;
  bytesOut: number;
}

/** A wait that can be given up (e.g. the `nosub` of a subscription that became ready). */
export interface Watch<T> {
  promise: Promise<T>;
  cancel(): void;
}

interface Waiter {
  needle: Buffer;
  /**
   * What is searched for within one read: the needle without a closing quote,
   * checked for afterwards. JSON is full of quotes, and a search whose last
   * byte is rare skips ahead much faster.
   */
  key: Buffer;
  /** Read the whole message that starts with the needle. */
  read: boolean;
  resolve(message: Record<string, unknown> | undefined): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout;
}

const QUOTE = 0x22;
const PING_PREFIX = Buffer.from('{"msg":"ping"');
const EMPTY: Buffer = Buffer.alloc(0);
/** A masked close frame with status 1000 (zero mask key, like every frame sent). */
const CLOSE_FRAME = Buffer.from([0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8]);
/** How long a close waits for the server's answering close frame. */
const CLOSE_WAIT_MS = 2000;
/** Where every connection's reads land (see `onread` in open()); whatever outlives a read is copied out. */
const READ_BUFFER = Buffer.allocUnsafe(65536);
/** Bytes of the last read kept so that a needle split between two reads is still found (needles are short). */
const OVERLAP = 256;

export class LeanConnection {
  /** Time of the last frame sent (servers drop clients silent for 30 s). */
  lastSend = 0;
  private waiters: Waiter[] = [];
  private tail: Buffer = EMPTY;
  /** Messages being read to their end, and who wants each. */
  private readings: Array<{ bytes: Buffer; waiter: Waiter }> = [];
  private remaining = 0;
  private partialHeader: Buffer = EMPTY;
  private pingFrame: Buffer | undefined;
  private closedError: Error | undefined;
  private closing: Promise<void> | undefined;
  private closeSent = false;

  private constructor(
    private readonly socket: Socket,
    private readonly counters: LeanCounters,
  ) {}

  static open(url: URL, counters: LeanCounters, timeoutMs: number): Promise<LeanConnection> {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const port = Number(url.port || 80);
    return new Promise((resolve, reject) => {
      let head = EMPTY;
      let connection: LeanConnection | undefined;
      const onHandshake = (chunk: Buffer) => {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\r\n\r\n');
        if (end === -1) return;
        clearTimeout(timer);
        socket.off('error', onError);
        const status = head.subarray(0, head.indexOf('\r\n')).toString();
        if (!/^HTTP\/1\.1 101/.test(status)) {
          socket.destroy();
          reject(new Error(`upgrade refused: ${status}`));
          return;
        }
        connection = new LeanConnection(socket, counters);
        connection.attach();
        const rest = head.subarray(end + 4);
        if (rest.length > 0) connection.receive(rest);
        resolve(connection);
      };
      const socket = connect({
        host,
        port,
        noDelay: true,
        // Every read lands in one buffer shared by all connections, instead of a new 64 KB one per
        // read: at S1 rates the generator otherwise spends much of its core allocating and collecting.
        onread: {
          buffer: READ_BUFFER,
          callback: (length: number, buffer: Uint8Array) => {
            const chunk = (buffer as Buffer).subarray(0, length);
            if (connection) connection.receive(chunk);
            else onHandshake(chunk);
            return true;
          },
        },
      });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error('connect timeout'));
      }, timeoutMs);
      const onError = (error: Error) => {
        clearTimeout(timer);
        reject(new Error(`connect failed: ${error.message}`));
      };
      socket.on('error', onError);
      socket.on('connect', () => {
        socket.write(
          `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
            `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
        );
      });
    });
  }

  get closed(): boolean {
    return this.closedError !== undefined;
  }

  send(text: string): void {
    if (this.closedError) throw this.closedError;
    const length = Buffer.byteLength(text);
    const headerLength = length < 126 ? 6 : length < 65536 ? 8 : 14;
    const frame = Buffer.allocUnsafe(headerLength + length);
    frame.fill(0, headerLength - 4, headerLength); // the zero mask key
    frame[0] = 0x81;
    if (length < 126) frame[1] = 0x80 | length;
    else if (length < 65536) {
      frame[1] = 0x80 | 126;
      frame.writeUInt16BE(length, 2);
    } else {
      frame[1] = 0x80 | 127;
      frame.writeBigUInt64BE(BigInt(length), 2);
    }
    frame.write(text, headerLength, 'utf8');
    this.socket.write(frame);
    this.counters.messagesOut++;
    this.counters.bytesOut += frame.length;
    this.lastSend = Date.now();
  }

  /** Resolves when `text` appears in what the server sends from now on. Register before sending what causes it. */
  waitFor(text: string, timeoutMs: number): Watch<void> {
    const watch = this.addWaiter(text, false, timeoutMs);
    return handled({ promise: watch.promise.then(() => undefined), cancel: watch.cancel });
  }

  /** Resolves with the message that starts with `prefix` (e.g. `{"msg":"result","id":"7"`), parsed. */
  readMessage(prefix: string, timeoutMs: number): Watch<Record<string, unknown>> {
    return handled(this.addWaiter(prefix, true, timeoutMs) as Watch<Record<string, unknown>>);
  }

  /**
   * Closes with the WebSocket closing handshake: what the server sent before it
   * read our close frame still arrives and is counted. Resolves when the
   * connection is closed (after CLOSE_WAIT_MS at most).
   */
  close(): Promise<void> {
    this.closedError ??= new Error('closed');
    this.failAll(this.closedError);
    this.closing ??= new Promise((resolve) => {
      if (this.socket.destroyed) return resolve();
      const timer = setTimeout(() => this.socket.destroy(), CLOSE_WAIT_MS);
      this.socket.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
      this.sendClose();
    });
    return this.closing;
  }

  private sendClose(): void {
    if (this.closeSent || !this.socket.writable) return;
    this.closeSent = true;
    this.socket.write(CLOSE_FRAME);
  }

  private addWaiter(text: string, read: boolean, timeoutMs: number): Watch<Record<string, unknown> | undefined> {
    let waiter: Waiter | undefined;
    const promise = new Promise<Record<string, unknown> | undefined>((resolve, reject) => {
      if (this.closedError) return reject(this.closedError);
      if (Buffer.byteLength(text) > OVERLAP) return reject(new Error('needle too long'));
      const entry: Waiter = {
        needle: Buffer.from(text),
        key: Buffer.from(text.endsWith('"') ? text.slice(0, -1) : text),
        read,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.remove(entry);
          reject(new Error(`timeout waiting for ${text}`));
        }, timeoutMs),
      };
      waiter = entry;
      this.waiters.push(entry);
    });
    return {
      promise,
      cancel: () => {
        if (!waiter) return;
        clearTimeout(waiter.timer);
        this.remove(waiter);
      },
    };
  }

  private remove(waiter: Waiter): void {
    this.waiters = this.waiters.filter((w) => w !== waiter);
    this.readings = this.readings.filter((r) => r.waiter !== waiter);
  }

  private attach(): void {
    const closed = (error?: Error) => {
      this.closedError ??= error ?? new Error('connection closed by the server');
      this.failAll(this.closedError);
    };
    this.socket.on('error', closed);
    this.socket.on('close', () => closed());
  }

  private receive(chunk: Buffer): void {
    this.counters.bytesIn += chunk.length;
    this.walkFrames(chunk);
    for (const reading of this.readings) reading.bytes = Buffer.concat([reading.bytes, chunk]);
    if (this.waiters.length > 0) {
      const waiters = this.waiters;
      for (let w = 0; w < waiters.length; w++) {
        const waiter = waiters[w]!;
        const from = this.find(waiter, chunk);
        if (!from) continue;
        this.waiters = this.waiters.filter((other) => other !== waiter);
        if (waiter.read) {
          this.readings.push({ bytes: from, waiter });
        } else {
          clearTimeout(waiter.timer);
          waiter.resolve(undefined);
        }
      }
    }
    if (this.readings.length > 0) {
      this.finishReadings();
      // A message still incomplete is kept for the next read: as a copy if it is a view of the shared read buffer.
      for (const reading of this.readings) if (reading.bytes.buffer === READ_BUFFER.buffer) reading.bytes = Buffer.from(reading.bytes);
    }
    // Only a needle awaited now can straddle this read and the next (whatever is awaited later is a
    // reply to something sent later). Copied: the read buffer is reused by the next read.
    if (this.waiters.length === 0) this.tail = EMPTY;
    else this.tail = chunk.length >= OVERLAP ? Buffer.from(chunk.subarray(chunk.length - OVERLAP)) : Buffer.concat([this.tail, chunk]).subarray(-OVERLAP);
  }

  /**
   * Where `needle` starts in the new bytes (or straddling the previous read's
   * end): the bytes from there on. Searches the read itself and joins only the
   * few bytes around the boundary, so reads are never copied whole.
   */
  private find({ needle, key }: Waiter, chunk: Buffer): Buffer | undefined {
    for (let at = chunk.indexOf(key); at !== -1; at = chunk.indexOf(key, at + 1)) {
      // The closing quote must follow; one beyond this read is checked with the next, across the boundary.
      if (key.length === needle.length || chunk[at + key.length] === QUOTE) return chunk.subarray(at);
    }
    if (this.tail.length === 0) return undefined;
    const before = this.tail.subarray(Math.max(0, this.tail.length - (needle.length - 1)));
    const joint = Buffer.concat([before, chunk.subarray(0, needle.length - 1)]);
    const j = joint.indexOf(needle);
    return j === -1 ? undefined : Buffer.concat([before.subarray(j), chunk]);
  }

  private finishReadings(): void {
    this.readings = this.readings.filter(({ bytes, waiter }) => {
      const end = jsonEnd(bytes);
      if (end === -1) return true;
      clearTimeout(waiter.timer);
      try {
        waiter.resolve(JSON.parse(bytes.subarray(0, end).toString()) as Record<string, unknown>);
      } catch (error) {
        waiter.reject(error as Error);
      }
      return false;
    });
  }

  /** Counts messages by frame header and answers server pings, without looking at other payloads. */
  private walkFrames(chunk: Buffer): void {
    let data = chunk;
    if (this.partialHeader.length > 0) {
      data = Buffer.concat([this.partialHeader, chunk]); // rare: a header split between two reads
      this.partialHeader = EMPTY;
    }
    let i = 0;
    while (i < data.length) {
      if (this.remaining > 0) {
        const take = Math.min(this.remaining, data.length - i);
        if (this.pingFrame) this.pingFrame = Buffer.concat([this.pingFrame, data.subarray(i, i + take)]);
        this.remaining -= take;
        i += take;
        if (this.remaining === 0 && this.pingFrame) this.answerPing();
        continue;
      }
      if (data.length - i < 2) {
        this.partialHeader = Buffer.from(data.subarray(i));
        return;
      }
      const short = data[i + 1]! & 127;
      const headerLength = short === 126 ? 4 : short === 127 ? 10 : 2;
      if (data.length - i < headerLength) {
        this.partialHeader = Buffer.from(data.subarray(i));
        return;
      }
      const length = short === 126 ? data.readUInt16BE(i + 2) : short === 127 ? Number(data.readBigUInt64BE(i + 2)) : short;
      const opcode = data[i]! & 0x0f;
      i += headerLength;
      // Text and binary frames are messages; control frames are not (servers do not fragment DDP messages).
      if (opcode === 0x1 || opcode === 0x2) this.counters.messagesIn++;
      // The server closes: answer its close frame so it need not wait for a timeout.
      else if (opcode === 0x8) this.sendClose();
      this.remaining = length;
      // A ping is short; collect it if its payload begins like one (as far as this read shows).
      // Compared in place: this runs for every message of every broadcast, so it allocates nothing.
      this.pingFrame = length > 0 && length < 64 && startsLikePing(data, i, Math.min(length, data.length - i)) ? EMPTY : undefined;
    }
  }

  private answerPing(): void {
    const text = this.pingFrame!.toString();
    this.pingFrame = undefined;
    // A ping still arriving while this side closes gets no answer (and must not throw from a socket callback).
    if (!text.startsWith('{"msg":"ping"') || this.closedError) return;
    const id = /"id":("(?:[^"\\]|\\.)*")/.exec(text)?.[1];
    this.send(id ? `{"msg":"pong","id":${id}}` : '{"msg":"pong"}');
  }

  private failAll(error: Error): void {
    const waiters = [...this.waiters, ...this.readings.map((r) => r.waiter)];
    this.waiters = [];
    this.readings = [];
    for (const waiter of waiters) {
      clearTimeout(waiter.timer);
      waiter.reject(error);
    }
  }
}

/**
 * A watch may be rejected (its connection closed) while its owner is still busy
 * sending what it waits for; the owner awaits it later, or cancels it. Without
 * this, that rejection would be "unhandled" and end the whole generator.
 */
function handled<T>(watch: Watch<T>): Watch<T> {
  watch.promise.catch(() => undefined);
  return watch;
}

/** Whether the `available` bytes of `data` at `at` agree with the start of a ping. */
function startsLikePing(data: Buffer, at: number, available: number): boolean {
  const n = Math.min(available, PING_PREFIX.length);
  for (let k = 0; k < n; k++) if (data[at + k] !== PING_PREFIX[k]) return false;
  return true;
}

/** End offset of the JSON value at the start of `buffer`, or -1 while it is incomplete. */
function jsonEnd(buffer: Buffer): number {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < buffer.length; i++) {
    const c = buffer[i]!;
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) {
      if (--depth === 0) return i + 1;
    }
  }
  return -1;
}
