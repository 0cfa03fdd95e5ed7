/**
 * DDPClient: a DDP session that survives connection loss. Method calls and
 * subscriptions belong to the client, not to a connection: they are (re)sent on
 * every connection, and after a reconnect the local store converges to what the
 * new session sends (see resync.ts).
 */
import { clone } from '../ddp/ejson.js';
import { DDPError } from '../ddp/errors.js';
import { SUPPORTED_VERSIONS, type MethodMessage, type ServerMessage } from '../ddp/messages.js';
import { METEOR_BACKOFF, retryDelay, type BackoffOptions } from './backoff.js';
import { Connection, type WebSocketConstructor } from './connection.js';
import { deferred, type Deferred } from './deferred.js';
import { isDocumentMessage, type Document } from './documents.js';
import { Emitter, ListenerSet } from './emitter.js';
import { defaultHotCodePush, reloadPage, watchVersion, type HotCodePush } from './hot-code-push.js';
import { MethodTracker, type MethodOptions } from './methods.js';
import { Resync, type DataMessage } from './resync.js';
import { LocalStore, type ClientCollection } from './store.js';
import { SubscriptionRegistry, type Subscription } from './subscriptions.js';
import { toWebSocketUrl } from './url.js';

/**
 * `idle`: not started (autoConnect off); `connecting`: socket or handshake under
 * way; `waiting`: for the next reconnect attempt; `closed`: by disconnect() or a
 * failure it does not retry.
 */
export type ClientStatus = 'idle' | 'connecting' | 'connected' | 'waiting' | 'closed';

export interface DDPClientOptions {
  /** WebSocket implementation; the global one by default (the Node entry point defaults to `ws`). */
  WebSocket?: WebSocketConstructor;
  /** Connect from the constructor (default true). */
  autoConnect?: boolean;
  /** Reconnect, with backoff, when the connection is lost (default true). */
  autoReconnect?: boolean;
  /** Ping the server after this many ms without a message from it; 0 turns client pings off (default 17500). */
  heartbeatInterval?: number;
  /** Reconnect if nothing arrives within this many ms of a ping (default 15000). */
  heartbeatTimeout?: number;
  /** Abandon an attempt that is not `connected` (socket and handshake) within this many ms (default 10000). */
  connectTimeout?: number;
  /** DDP versions to offer, most preferred first (default ['1', 'pre2', 'pre1']). */
  versions?: readonly string[];
  /** Reconnect delays; Meteor's by default. */
  backoff?: Partial<BackoffOptions>;
  /**
   * When the server runs a new version of the app (`perseid dev` restarted it):
   * `reload` the page (the default in browsers), `keep` it (the subscriptions are
   * re-sent to the new server; listen to `newVersion`), or false to not watch
   * (the default in Node).
   */
  hotCodePush?: HotCodePush;
}

export interface DisconnectInfo {
  reason: string;
  /** The WebSocket close code, if the socket was closed with one. */
  code?: number;
  willReconnect: boolean;
}

export interface ClientEvents {
  status: [status: ClientStatus];
  connected: [sessionId: string];
  /** A connection that had reached `connected` ended. */
  disconnected: [info: DisconnectInfo];
  /** Every message from the server, before the client acts on it. */
  message: [message: ServerMessage];
  /** Socket errors, undecodable or malformed messages, the server's `error` messages, an unusable DDP version. */
  error: [error: Error];
  /** The server runs a new version of the app (see the `hotCodePush` option). */
  newVersion: [version: string];
}

type Settings = Required<Omit<DDPClientOptions, 'backoff'>> & { backoff: BackoffOptions };

export class DDPClient extends Emitter<ClientEvents> {
  /** The WebSocket URL in use. */
  readonly url: string;
  private readonly settings: Settings;
  private readonly store = new LocalStore();
  private readonly methods = new MethodTracker();
  private readonly subscriptions = new SubscriptionRegistry((sub) => this.subscriptionStopped(sub));
  private currentStatus: ClientStatus = 'idle';
  private session: string | undefined;
  /** The version proposed in `connect`: the preferred one until a server asks for another. */
  private version: string;
  private connection: Connection | undefined;
  private resync: Resync | undefined;
  private hadSession = false;
  private retries = 0;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private pendingConnect: Deferred<string> | undefined;
  private readonly reconnectHooks = new ListenerSet<[]>();

  constructor(url: string, options: DDPClientOptions = {}) {
    super();
    this.url = toWebSocketUrl(url);
    const WebSocket = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!WebSocket) {
      throw new Error(
        'No WebSocket implementation: pass options.WebSocket (in Node, import perseid/client, which uses ws)',
      );
    }
    const versions = options.versions ?? SUPPORTED_VERSIONS;
    const [preferred] = versions;
    if (preferred === undefined) throw new Error('options.versions must name at least one DDP version');
    this.version = preferred;
    this.settings = {
      WebSocket,
      autoConnect: options.autoConnect ?? true,
      autoReconnect: options.autoReconnect ?? true,
      heartbeatInterval: options.heartbeatInterval ?? 17500,
      heartbeatTimeout: options.heartbeatTimeout ?? 15000,
      connectTimeout: options.connectTimeout ?? 10000,
      versions,
      backoff: { ...METEOR_BACKOFF, ...options.backoff },
      hotCodePush: options.hotCodePush ?? defaultHotCodePush(),
    };
    const hotCodePush = this.settings.hotCodePush;
    if (hotCodePush) {
      watchVersion(this, (version) => {
        this.emit('newVersion', version);
        if (hotCodePush === 'reload') reloadPage();
      });
    }
    if (this.settings.autoConnect) void this.connect();
  }

  get status(): ClientStatus {
    return this.currentStatus;
  }

  /** The server's id for the current session; undefined while not connected. */
  get sessionId(): string | undefined {
    return this.session;
  }

  /**
   * Connects (or, while waiting to reconnect, retries at once). Resolves with the
   * session id once connected; rejects if the client closes first.
   */
  connect(): Promise<string> {
    if (this.currentStatus === 'connected' && this.session !== undefined) return Promise.resolve(this.session);
    this.pendingConnect ??= deferred(true);
    const { promise } = this.pendingConnect;
    if (this.currentStatus !== 'connecting') this.open();
    return promise;
  }

  /**
   * Closes the connection and does not reconnect until connect() is called.
   * Outstanding method calls fail (nobody will answer them); subscriptions and
   * documents stay, and are brought up to date by the next connect().
   */
  disconnect(): void {
    if (this.currentStatus === 'closed') return;
    const wasConnected = this.currentStatus === 'connected';
    this.detach();
    this.close(new DDPError('disconnected', 'The client disconnected'));
    if (wasConnected) this.emit('disconnected', { reason: 'client disconnect', willReconnect: false });
  }

  /** Calls a method; see {@link apply}. */
  call<Result = unknown>(method: string, ...params: unknown[]): Promise<Result> {
    return this.apply<Result>(method, params);
  }

  /**
   * Calls a method. Resolves with its result once the server has also reported
   * its writes done (`updated`), so they are in the store; rejects with a
   * DDPError. Calls made while not connected are sent on connection.
   */
  apply<Result = unknown>(
    method: string,
    params: readonly unknown[] = [],
    options: MethodOptions = {},
  ): Promise<Result> {
    if (this.currentStatus === 'closed') {
      return Promise.reject(new DDPError('disconnected', 'The client is disconnected; call connect() first'));
    }
    // A copy, as Meteor takes: the call may be re-sent after the caller changed its arguments.
    const { message, promise } = this.methods.create(method, params.map(clone), options);
    if (this.currentStatus === 'connected') this.sendMethod(message);
    // The caller states the result type; the server is not checked against it.
    return promise as Promise<Result>;
  }

  /**
   * Runs `callback` on every reconnect, before the client re-sends its calls and
   * subscriptions (Meteor's `onReconnect`): a call made there goes first, so a
   * resume login precedes the subscriptions it affects. Returns a remover.
   */
  onReconnect(callback: () => void): () => void {
    return this.reconnectHooks.add(callback);
  }

  /** Subscribes to a publication, now or on the next connection. */
  subscribe(name: string, ...params: unknown[]): Subscription {
    const subscription = this.subscriptions.create(name, params.map(clone));
    if (this.currentStatus === 'connected') this.sendSubscription(subscription);
    return subscription;
  }

  /** The local copy of a collection (empty until the server sends documents). */
  collection<T extends object = Document>(name: string): ClientCollection<T> {
    // The server decides what documents look like; T is the caller's description of it.
    return this.store.collection(name) as unknown as ClientCollection<T>;
  }

  private setStatus(status: ClientStatus): void {
    if (status === this.currentStatus) return;
    this.currentStatus = status;
    this.emit('status', status);
  }

  private open(): void {
    clearTimeout(this.retryTimer);
    const { url, settings } = this;
    this.connection = new Connection(
      {
        url,
        WebSocket: settings.WebSocket,
        version: this.version,
        support: settings.versions,
        connectTimeout: settings.connectTimeout,
        heartbeatInterval: settings.heartbeatInterval,
        heartbeatTimeout: settings.heartbeatTimeout,
      },
      {
        message: (message) => this.received(message),
        connected: (session) => this.connected(session),
        failed: (version) => this.versionRefused(version),
        lost: (reason, code) => this.connectionLost(reason, code),
        error: (error) => this.emit('error', error),
      },
    );
    this.setStatus('connecting');
  }

  private connected(session: string): void {
    this.session = session;
    this.retries = 0;
    if (this.hadSession) this.reconnectHooks.notify();
    const outstanding = this.methods.unsent();
    // Meteor's order: methods first (a re-sent login precedes the subscriptions it affects).
    for (const message of outstanding) this.sendMethod(message);
    for (const subscription of this.subscriptions.all()) this.sendSubscription(subscription);
    if (this.hadSession) {
      this.resync = new Resync(this.subscriptions.readyIds(), outstanding.map((message) => message.id));
    }
    this.hadSession = true;
    this.setStatus('connected');
    if (this.currentStatus !== 'connected') return; // a status listener disconnected
    this.pendingConnect?.resolve(session);
    this.pendingConnect = undefined;
    this.emit('connected', session);
    if (this.resync?.complete) this.finishResync();
  }

  private versionRefused(version: string): void {
    this.connection = undefined;
    // Retry at once with the server's choice, unless it is the version it just refused.
    if (version !== this.version && this.settings.versions.includes(version)) {
      this.version = version;
      this.open();
      return;
    }
    const error = new DDPError(
      'version-mismatch',
      `The server requires DDP version ${version}, which this client does not offer`,
    );
    this.close(error);
    this.emit('error', error);
  }

  private connectionLost(reason: string, code?: number): void {
    const wasConnected = this.currentStatus === 'connected';
    this.detach();
    if (this.settings.autoReconnect) {
      this.retryTimer = setTimeout(() => this.open(), retryDelay(this.retries++, this.settings.backoff));
      this.setStatus('waiting');
    } else {
      this.close(new DDPError('connection-lost', `The connection was lost: ${reason}`));
    }
    // Read the status again: a status listener may have called disconnect().
    if (wasConnected) this.emit('disconnected', { reason, code, willReconnect: this.currentStatus === 'waiting' });
  }

  /** Drops the connection and its state; calls, subscriptions and documents stay. */
  private detach(): void {
    this.connection?.close();
    this.connection = undefined;
    this.session = undefined;
    this.resync = undefined;
    this.methods.connectionLost();
  }

  /** Stops for good (until connect()): nothing outstanding will be answered. */
  private close(error: DDPError): void {
    clearTimeout(this.retryTimer);
    this.methods.failAll(error);
    this.pendingConnect?.reject(error);
    this.pendingConnect = undefined;
    this.setStatus('closed');
  }

  private received(message: ServerMessage): void {
    this.emit('message', message);
    switch (message.msg) {
      case 'added':
      case 'changed':
      case 'removed':
      case 'addedBefore':
      case 'movedBefore':
      case 'ready':
      case 'nosub':
      case 'updated':
        if (!this.resync) {
          this.applyData(message);
          break;
        }
        this.resync.hold(message);
        if (this.resync.complete) this.finishResync();
        break;
      case 'result':
        this.methods.result(message);
        break;
      case 'error':
        this.emit('error', new DDPError('server-error', message.reason, message.offendingMessage));
        break;
    }
  }

  private applyData(message: DataMessage): void {
    switch (message.msg) {
      case 'ready':
        this.subscriptions.ready(message.subs);
        break;
      case 'nosub':
        this.subscriptions.nosub(message.id, message.error && DDPError.fromJSON(message.error));
        break;
      case 'updated':
        this.methods.updated(message.methods);
        break;
      default:
        this.store.apply(message);
    }
  }

  /** Switches the store to the new session's documents, then lets readiness and method completion through. */
  private finishResync(): void {
    const held = this.resync?.messages ?? [];
    this.resync = undefined;
    this.store.reset(held.filter(isDocumentMessage));
    for (const message of held) if (!isDocumentMessage(message)) this.applyData(message);
    this.methods.settleOrphans();
  }

  private sendMethod(message: MethodMessage): void {
    this.connection?.send(message);
    this.methods.markSent(message.id);
  }

  private sendSubscription({ id, name, params }: Subscription): void {
    this.connection?.send({ msg: 'sub', id, name, params: [...params] });
  }

  private subscriptionStopped(subscription: Subscription): void {
    if (this.currentStatus === 'connected') this.connection?.send({ msg: 'unsub', id: subscription.id });
    if (!this.resync) return;
    this.resync.forgetSubscription(subscription.id);
    if (this.resync.complete) this.finishResync();
  }
}
