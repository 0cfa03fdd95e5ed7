/** Shared test fixtures: a real server on a loopback port over a fresh embedded store, and a raw DDP peer. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { Collection } from '../src/collections/collection.js';
import { openDatabase, setDefaultDatabase, type Database } from '../src/collections/database.js';
import { setLogLevel } from '../src/log.js';
import { createServer, type PerseidServer, type ServerOptions } from '../src/server/app.js';

setLogLevel((process.env.PERSEID_LOG_LEVEL as never) ?? 'silent');

export interface TestServer {
  server: PerseidServer;
  database: Database;
  url: string;
  wsUrl: string;
  port: number;
  collection<T extends object = Record<string, unknown>>(name: string): Collection<T>;
  close(): Promise<void>;
}

/**
 * A server on 127.0.0.1 (random port) whose collections live in a temporary
 * embedded store, which is also made the default database (for app modules
 * that declare collections without one).
 */
export async function startServer(setup: (server: PerseidServer, t: Omit<TestServer, 'url' | 'wsUrl' | 'port' | 'close'>) => unknown, options: ServerOptions = {}): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), 'perseid-test-'));
  const database = await openDatabase({ dataDir: dir });
  setDefaultDatabase(database);
  const server = createServer(options);
  const collection = <T extends object>(name: string) => new Collection<T>(name, { database });
  await setup(server, { server, database, collection });
  const { url, port } = await server.listen(0, '127.0.0.1');
  return {
    server,
    database,
    url,
    port,
    wsUrl: `ws://127.0.0.1:${port}/websocket`,
    collection,
    async close() {
      await server.close();
      await database.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export type Message = Record<string, unknown> & { msg?: string };

/** A small deterministic generator (mulberry32), so a failure names a seed that reproduces it. */
export function seededRandom(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Asserts that a message matching `first` and one matching `second` both came, in that order. */
export function assertBefore(messages: readonly Message[], first: (m: Message) => boolean, second: (m: Message) => boolean, what: string): void {
  const a = messages.findIndex(first);
  const b = messages.findIndex(second);
  assert.ok(a !== -1 && b !== -1 && a < b, `${what}: ${JSON.stringify(messages)}`);
}

/**
 * A DDP peer on a raw WebSocket: sends JSON, and lets a test wait for the next
 * message matching a predicate, with every message kept in order for assertions.
 */
export class RawPeer {
  readonly received: Message[] = [];
  private cursor = 0;
  private waiters: Array<() => void> = [];
  closed: { code: number; reason: string } | undefined;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      this.received.push(JSON.parse(data.toString()) as Message);
      this.wake();
    });
    ws.on('close', (code, reason) => {
      this.closed = { code, reason: reason.toString() };
      this.wake();
    });
    ws.on('error', () => undefined);
  }

  static async open(url: string, options: WebSocket.ClientOptions = {}): Promise<RawPeer> {
    const ws = new WebSocket(url, { perMessageDeflate: false, ...options });
    // Listening from the start: a message in the same packet as the handshake arrives right after 'open'.
    const peer = new RawPeer(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    return peer;
  }

  /** Opens and completes the DDP handshake; resolves with the session id. */
  static async connected(url: string, version = '1'): Promise<RawPeer & { session: string }> {
    const peer = await RawPeer.open(url);
    peer.send({ msg: 'connect', version, support: [version] });
    const connected = await peer.next((m) => m.msg === 'connected');
    return Object.assign(peer, { session: connected.session as string });
  }

  send(message: unknown): void {
    this.ws.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /** The next message (after the last one returned) that matches; fails after `timeoutMs`. */
  async next(match: (m: Message) => boolean = () => true, timeoutMs = 5000): Promise<Message> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      while (this.cursor < this.received.length) {
        const m = this.received[this.cursor++]!;
        if (match(m)) return m;
      }
      if (this.closed) throw new Error(`connection closed (${this.closed.code}) while waiting; got ${JSON.stringify(this.received.slice(-5))}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out; last messages: ${JSON.stringify(this.received.slice(-5))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** Messages received from now on until `match`, inclusive. */
  async until(match: (m: Message) => boolean, timeoutMs = 5000): Promise<Message[]> {
    const start = this.cursor;
    await this.next(match, timeoutMs);
    return this.received.slice(start, this.cursor);
  }

  /**
   * A round trip through the connection's method queue (a call of a method no
   * server defines): everything the earlier messages caused has arrived once
   * it returns. Returns what arrived before its answer, to assert that nothing
   * more came, without a timed wait.
   */
  async barrier(): Promise<Message[]> {
    const id = `barrier-${this.received.length}`;
    const { all } = await this.call(id, 'perseid-test-barrier');
    return all.filter((m) => m.id !== id && !(m.msg === 'updated' && (m.methods as string[]).includes(id)));
  }

  async call(id: string, method: string, params: unknown[] = [], extra: object = {}): Promise<{ result: Message; all: Message[] }> {
    this.send({ msg: 'method', id, method, params, ...extra });
    let result: Message | undefined;
    let updated = false;
    const all = await this.until((m) => {
      if (m.msg === 'result' && m.id === id) result = m;
      if (m.msg === 'updated' && (m.methods as string[]).includes(id)) updated = true;
      return result !== undefined && updated;
    });
    return { result: result!, all };
  }

  async waitClosed(timeoutMs = 5000): Promise<{ code: number; reason: string }> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    if (!this.closed) throw new Error('connection did not close');
    return this.closed;
  }

  close(): void {
    this.ws.close();
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}

/** The value of the series `name{labels}` in a Prometheus text (labels exactly as served), or undefined when absent. */
export function seriesValue(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/**
 * A raw WebSocket client that sends DDP `connect` and resolves once `connected` comes, then closes;
 * `localAddress` makes it another client than a flood's, on another loopback address.
 */
export function ddpConnects(url: string, options: { localAddress?: string; perMessageDeflate?: boolean; timeoutMs?: number } = {}): Promise<void> {
  const { timeoutMs = 5000, ...socketOptions } = options;
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/websocket`, socketOptions);
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error(`no \`connected\` from ${url} within ${timeoutMs} ms`));
    }, timeoutMs);
    ws.on('open', () => ws.send(JSON.stringify({ msg: 'connect', version: '1', support: ['1'] })));
    ws.on('message', (data) => {
      if (!String(data).includes('"connected"')) return;
      clearTimeout(timer);
      ws.close();
      resolve();
    });
    ws.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}
