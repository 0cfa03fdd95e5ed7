/** The two LoadClient implementations and how to connect one. */
import WebSocket, { type RawData } from 'ws';
import type { WebSocketConstructor } from '../client/connection.js';
import { DDPClient } from '../client/node.js';
import type { Document } from '../client/documents.js';
import type { LocalCollection as ClientCollection } from '../client/local-collection.js';
import { toWebSocketUrl } from '../client/url.js';
import { fromJSONValue, toJSONValue } from '../ddp/ejson.js';
import { DDPError } from '../ddp/errors.js';
import { Random, RandomStream, collectionIdSequence } from '../ddp/random.js';
import { LeanConnection } from './lean-connection.js';
import type { ApplyOptions, ClientCounters, LoadClient, SubscriptionHandle } from './load-client.js';

function seededInsert(collection: string): { randomSeed: string; id: string } {
  const randomSeed = Random.hexString(20);
  return { randomSeed, id: collectionIdSequence(new RandomStream(randomSeed), collection).id() };
}

/** Decodes only the messages it waits for; see lean-connection.ts. */
export class LeanLoadClient implements LoadClient {
  readonly mode = 'lean';
  private methodIds = 0;
  private subIds = 0;

  private constructor(
    private readonly connection: LeanConnection,
    private readonly timeoutMs: number,
  ) {}

  static async connect(url: string, counters: ClientCounters, timeoutMs: number): Promise<LeanLoadClient> {
    const connection = await LeanConnection.open(new URL(toWebSocketUrl(url)), counters, timeoutMs);
    try {
      const connected = connection.waitFor('"msg":"connected"', timeoutMs);
      const failed = connection.readMessage('{"msg":"failed"', timeoutMs);
      connection.send('{"msg":"connect","version":"1","support":["1","pre2","pre1"]}');
      const outcome = await Promise.race([connected.promise.then(() => undefined), failed.promise]);
      failed.cancel();
      if (outcome) throw new Error(`the server wants DDP version ${String(outcome.version)}`);
      return new LeanLoadClient(connection, timeoutMs);
    } catch (error) {
      void connection.close();
      throw error;
    }
  }

  call<T = unknown>(method: string, ...params: unknown[]): Promise<T> {
    return this.apply<T>(method, params);
  }

  async apply<T = unknown>(method: string, params: unknown[], options: ApplyOptions = {}): Promise<T> {
    const id = String(++this.methodIds);
    const result = this.connection.readMessage(`{"msg":"result","id":"${id}"`, this.timeoutMs);
    const updated = this.connection.waitFor(`"methods":["${id}"]`, this.timeoutMs);
    const seed = options.randomSeed === undefined ? '' : `,"randomSeed":${JSON.stringify(options.randomSeed)}`;
    this.connection.send(`{"msg":"method","id":"${id}","method":${JSON.stringify(method)},"params":${JSON.stringify(toJSONValue(params))}${seed}}`);
    const [message] = await Promise.all([result.promise, updated.promise]);
    if (message.error) throw DDPError.fromJSON(message.error);
    return fromJSONValue(message.result) as T;
  }

  async subscribe(name: string, ...params: unknown[]): Promise<SubscriptionHandle> {
    const id = `s${++this.subIds}`;
    const ready = this.connection.waitFor(`"subs":["${id}"]`, this.timeoutMs);
    const nosub = this.connection.readMessage(`{"msg":"nosub","id":"${id}"`, this.timeoutMs);
    this.connection.send(`{"msg":"sub","id":"${id}","name":${JSON.stringify(name)},"params":${JSON.stringify(toJSONValue(params))}}`);
    const refused = await Promise.race([ready.promise.then(() => undefined), nosub.promise]);
    nosub.cancel();
    ready.cancel();
    if (refused) throw refused.error ? DDPError.fromJSON(refused.error) : new Error(`subscription ${name} stopped before it was ready`);
    return {
      id,
      stop: async () => {
        const done = this.connection.waitFor(`{"msg":"nosub","id":"${id}"`, this.timeoutMs);
        this.connection.send(`{"msg":"unsub","id":"${id}"}`);
        await done.promise;
      },
    };
  }

  async expect(change: 'added' | 'removed', collection: string, id: string, action: () => Promise<unknown>): Promise<void> {
    // Meteor and Perseid write msg, collection and id first, in that order.
    const seen = this.connection.waitFor(`{"msg":"${change}","collection":${JSON.stringify(collection)},"id":${JSON.stringify(id)}`, this.timeoutMs);
    try {
      await action();
    } catch (error) {
      seen.cancel();
      throw error;
    }
    await seen.promise;
  }

  seededInsert(collection: string): { randomSeed: string; id: string } {
    return seededInsert(collection);
  }

  collection<T extends Document = Document>(name: string): ClientCollection<T> {
    throw new Error(`The lean client keeps no documents (collection ${name}); use the full client ("client": "full" in the scenario's options)`);
  }

  close(): Promise<void> {
    return this.connection.close();
  }
}

/**
 * The `ws` WebSocket, counting the messages and bytes of every frame the full client sends and receives,
 * and telling `onRefused` the HTTP status of an upgrade the server refused (the client says only that the connection closed).
 */
function countingWebSocket(counters: ClientCounters, onRefused: (status: string) => void): WebSocketConstructor {
  return class CountingWebSocket extends WebSocket {
    constructor(url: string) {
      super(url);
      this.once('error', (error) => {
        const status = /^Unexpected server response: (\d+)/.exec(error.message)?.[1];
        if (status) onRefused(status);
      });
      this.on('message', (data: RawData) => {
        counters.messagesIn++;
        counters.bytesIn += Array.isArray(data) ? data.reduce((n, b) => n + b.length, 0) : data.byteLength;
      });
      const send = this.send.bind(this);
      this.send = (data: string) => {
        counters.messagesOut++;
        counters.bytesOut += Buffer.byteLength(data);
        send(data);
      };
    }
  };
}

/** The perseid/client DDPClient: every message decoded, documents kept, waits on collection state. */
export class FullLoadClient implements LoadClient {
  readonly mode = 'full';
  /** Why the connection ended, once it has: the client keeps subscriptions waiting for a reconnect that never comes here. */
  private lost: Error | undefined;
  private readonly onLost = new Set<(error: Error) => void>();

  private constructor(
    private readonly client: DDPClient,
    private readonly timeoutMs: number,
  ) {
    client.on('disconnected', ({ reason }) => {
      this.lost ??= new Error(reason === 'client disconnect' ? 'closed' : 'connection closed by the server');
      for (const fail of this.onLost) fail(this.lost);
    });
  }

  static async connect(url: string, counters: ClientCounters, timeoutMs: number): Promise<FullLoadClient> {
    let refused: string | undefined;
    const client = new DDPClient(url, { autoReconnect: false, connectTimeout: timeoutMs, WebSocket: countingWebSocket(counters, (status) => (refused = status)) });
    try {
      await client.connect();
    } catch (error) {
      // Said as the lean client says it, so that both count it under one kind.
      throw refused ? new Error(`upgrade refused: HTTP ${refused}`) : error;
    }
    return new FullLoadClient(client, timeoutMs);
  }

  /** `work`, failed when the connection ends or `timeoutMs` passes first, as every wait of the lean client is. */
  private bounded<T>(what: string, work: Promise<T>): Promise<T> {
    work.catch(() => undefined); // it may settle after it was given up
    if (this.lost) return Promise.reject(this.lost);
    let fail: (error: Error) => void = () => undefined;
    let timer: NodeJS.Timeout | undefined;
    const ended = new Promise<never>((_, reject) => {
      fail = reject;
      timer = setTimeout(() => reject(new Error(`timeout waiting for ${what}`)), this.timeoutMs);
    });
    this.onLost.add(fail);
    return Promise.race([work, ended]).finally(() => {
      clearTimeout(timer);
      this.onLost.delete(fail);
    });
  }

  call<T = unknown>(method: string, ...params: unknown[]): Promise<T> {
    return this.bounded(`the result of ${method}`, this.client.call<T>(method, ...params));
  }

  apply<T = unknown>(method: string, params: unknown[], options: ApplyOptions = {}): Promise<T> {
    return this.bounded(`the result of ${method}`, this.client.apply<T>(method, params, options));
  }

  async subscribe(name: string, ...params: unknown[]): Promise<SubscriptionHandle> {
    const sub = this.client.subscribe(name, ...params);
    await this.bounded(`subscription ${name} to be ready`, sub.ready);
    return {
      id: sub.id,
      stop: () =>
        this.bounded(
          `subscription ${name} to stop`,
          new Promise<void>((resolve) => {
            sub.onStop(() => resolve());
            sub.stop();
          }),
        ),
    };
  }

  async expect(change: 'added' | 'removed', collection: string, id: string, action: () => Promise<unknown>): Promise<void> {
    const local = this.client.collection(collection);
    let unsubscribe: (() => void) | undefined;
    const seen = new Promise<void>((resolve) => {
      unsubscribe = local.onChange((c) => {
        if (c.type === change && c.id === id) resolve();
      });
    });
    try {
      await action();
      await this.bounded(`${change} ${collection} ${id}`, seen);
    } finally {
      unsubscribe?.();
    }
  }

  seededInsert(collection: string): { randomSeed: string; id: string } {
    return seededInsert(collection);
  }

  collection<T extends Document = Document>(name: string): ClientCollection<T> {
    return this.client.collection<T>(name);
  }

  /** The full client stops listening at once: messages still in flight are not counted. */
  close(): Promise<void> {
    this.client.disconnect();
    return Promise.resolve();
  }
}

export function connectClient(mode: 'lean' | 'full', url: string, counters: ClientCounters, timeoutMs: number): Promise<LoadClient> {
  return mode === 'lean' ? LeanLoadClient.connect(url, counters, timeoutMs) : FullLoadClient.connect(url, counters, timeoutMs);
}
