/**
 * A scripted DDP server for client tests: each test plays the server's part by
 * hand on a real socket, and waits for what the client sends with a deadline.
 */
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { DDPClient, type ClientEvents, type DDPClientOptions, type DocumentChange } from '../src/client/node.js';

export type Json = Record<string, unknown>;

/** Guards every wait in the client tests, so that a broken client fails a test instead of hanging it. */
export const WAIT_LIMIT = 4000;

export function withLimit<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Timed out waiting for ${what}`)), WAIT_LIMIT);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

/** One client connection, as the scripted peer sees it. */
export class PeerSocket {
  /** Every message the client sent on this connection. */
  readonly received: Json[] = [];
  private readonly unclaimed: Json[] = [];
  private readonly waiters: { accepts: (message: Json) => boolean; resolve: (message: Json) => void }[] = [];
  private syncs = 0;

  constructor(
    readonly ws: WebSocket,
    readonly path: string,
  ) {
    ws.on('message', (data) => {
      const message = JSON.parse(String(data)) as Json;
      this.received.push(message);
      const index = this.waiters.findIndex((waiter) => waiter.accepts(message));
      if (index === -1) this.unclaimed.push(message);
      else this.waiters.splice(index, 1)[0]!.resolve(message);
    });
  }

  send(message: Json): void {
    this.ws.send(JSON.stringify(message));
  }

  /** The next message of type `msg` (or accepted by the predicate); other messages stay for later calls. */
  next(wanted: string | ((message: Json) => boolean)): Promise<Json> {
    const accepts = typeof wanted === 'string' ? (message: Json) => message.msg === wanted : wanted;
    const index = this.unclaimed.findIndex(accepts);
    if (index !== -1) return Promise.resolve(this.unclaimed.splice(index, 1)[0]!);
    const waiting = new Promise<Json>((resolve) => this.waiters.push({ accepts, resolve }));
    return withLimit(waiting, `a client message (${String(wanted)})`);
  }

  /** Answers `connect`; returns it. */
  async handshake(session = 'session-1'): Promise<Json> {
    const connect = await this.next('connect');
    this.send({ msg: 'connected', session });
    return connect;
  }

  /** Resolves once the client has processed everything sent before: it answers pings in order. */
  async sync(): Promise<void> {
    const id = `sync-${++this.syncs}`;
    this.send({ msg: 'ping', id });
    await this.next((message) => message.msg === 'pong' && message.id === id);
  }

  /** Whether the client sends `connect` on this connection before it closes it. */
  saysConnect(): Promise<boolean> {
    if (this.received.some((m) => m.msg === 'connect')) return Promise.resolve(true);
    if (this.ws.readyState === this.ws.CLOSED) return Promise.resolve(false);
    return new Promise((resolve) => {
      this.ws.once('close', () => resolve(this.received.some((m) => m.msg === 'connect')));
      this.next('connect').then(
        () => resolve(true),
        () => resolve(false),
      );
    });
  }

  /** Drops the connection without a closing handshake. */
  drop(): void {
    this.ws.terminate();
  }
}

/** A scripted DDP server on a real socket: each test plays the server's part by hand. */
export class Peer {
  private readonly sockets: PeerSocket[] = [];
  private readonly waiting: ((socket: PeerSocket) => void)[] = [];

  private constructor(private readonly server: WebSocketServer) {
    server.on('connection', (ws, request) => {
      const socket = new PeerSocket(ws, request.url ?? '');
      const waiter = this.waiting.shift();
      if (waiter) waiter(socket);
      else this.sockets.push(socket);
    });
  }

  static async start(port = 0): Promise<Peer> {
    const server = new WebSocketServer({ host: '127.0.0.1', port });
    await new Promise((resolve) => server.once('listening', resolve));
    return new Peer(server);
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `ws://127.0.0.1:${this.port}/websocket`;
  }

  /** The next connection a client opens. */
  connection(): Promise<PeerSocket> {
    const socket = this.sockets.shift();
    if (socket) return Promise.resolve(socket);
    return withLimit(new Promise((resolve) => this.waiting.push(resolve)), 'a connection');
  }

  async close(): Promise<void> {
    for (const ws of this.server.clients) ws.terminate();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/** Retries after 5 ms, then 10, 20, … up to 50 ms: fast, and still a backoff. */
export const FAST_BACKOFF = { minCount: 1, minTimeout: 5, baseTimeout: 5, exponent: 2, maxTimeout: 50, fuzz: 0 };

export async function scenario(
  options: DDPClientOptions,
  body: (peer: Peer, client: DDPClient) => Promise<void>,
): Promise<void> {
  const peer = await Peer.start();
  const client = new DDPClient(peer.url, { heartbeatInterval: 0, backoff: FAST_BACKOFF, ...options });
  try {
    await body(peer, client);
  } finally {
    client.disconnect();
    await peer.close();
  }
}

/** A client connected to a fresh peer, and the peer's side of that connection. */
export async function connected(
  options: DDPClientOptions,
  body: (socket: PeerSocket, client: DDPClient, peer: Peer) => Promise<void>,
): Promise<void> {
  await scenario(options, async (peer, client) => {
    const socket = await peer.connection();
    await socket.handshake();
    await client.connect();
    await body(socket, client, peer);
  });
}

export function nextEvent<K extends keyof ClientEvents>(client: DDPClient, event: K): Promise<ClientEvents[K]> {
  return withLimit(new Promise((resolve) => client.once(event, (...args) => resolve(args))), `the ${event} event`);
}

/** Tracks whether a promise has settled, without making a rejection unhandled. */
export function track<T>(promise: Promise<T>): { readonly settled: boolean } {
  const state = { settled: false };
  promise.then(
    () => (state.settled = true),
    () => (state.settled = true),
  );
  return state;
}

export function recordChanges(client: DDPClient, collection: string): DocumentChange[] {
  const changes: DocumentChange[] = [];
  client.collection(collection).onChange((change) => changes.push(change));
  return changes;
}

export const summary = (changes: DocumentChange[]): unknown[] =>
  changes.map((change) =>
    change.type === 'changed' ? [change.type, change.id, change.fields] : [change.type, change.id],
  );
