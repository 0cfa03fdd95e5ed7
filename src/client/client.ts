/**
 * DDPClient: a DDP session that survives connection loss. Method calls and
 * subscriptions belong to the client, not to a connection: they are (re)sent on
 * every connection. After a reconnect the server either resumes the session
 * (Meteor 3.5: it replays what the client missed, nothing else changes) or
 * starts a new one, and the local store then converges to what the new
 * session sends (see quiescence.ts). Method stubs run at once against the
 * local collections (stubs.ts, server-documents.ts).
 */
import type { InputsOf, MethodDefinition, PublicationDefinition, ResultOf } from '../contract/index.js';
import { clone } from '../ddp/ejson.js';
import { DDPError } from '../ddp/errors.js';
import { SUPPORTED_VERSIONS, type MethodMessage, type ServerMessage } from '../ddp/messages.js';
import { METEOR_BACKOFF, RESTART_RETRY_MS, RESTART_WINDOW_MS, retryDelay, SERVER_RESTART_CODE, type BackoffOptions } from './backoff.js';
import { ClientErrors } from './client-errors.js';
import { Connection, type WebSocketConstructor } from './connection.js';
import { deferred, type Deferred } from './deferred.js';
import { isDocumentMessage, type Document } from './documents.js';
import { Emitter, ListenerSet } from './emitter.js';
import { defaultHotCodePush, reloadPage, watchVersion, type HotCodePush } from './hot-code-push.js';
import type { LocalCollection } from './local-collection.js';
import { listen, reportTo, takeMethodCallback, takeSubscriptionCallbacks, type MethodCallback } from './meteor-callbacks.js';
import { MethodTracker, type MethodOptions } from './methods.js';
import { checkClientOptionNames, checkMethodOptionNames } from './option-names.js';
import { Quiescence, type DataMessage } from './quiescence.js';
import { LocalStore } from './store.js';
import { Simulation, type Stub, type StubInvocation } from './stubs.js';
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
  /** `resumed`: the server kept the session across the reconnect and replayed what the client missed. */
  connected: [sessionId: string, resumed: boolean];
  /** A connection that had reached `connected` ended. */
  disconnected: [info: DisconnectInfo];
  /** Every message from the server, before the client acts on it. */
  message: [message: ServerMessage];
  /**
   * Socket errors, undecodable or malformed messages, the server's `error`
   * messages, an unusable DDP version, and exceptions thrown by method stubs.
   */
  error: [error: Error];
  /** The user the session is logged in as changed (set by AccountsClient). */
  user: [userId: string | null];
  /** The server runs a new version of the app (see the `hotCodePush` option). */
  newVersion: [version: string];
}

/** A call's promise, with Meteor 3's `stubPromise` (what the stub returned or threw) and `serverPromise` (the call's own). */
export type MethodPromise<T> = Promise<T> & { readonly stubPromise: Promise<unknown>; readonly serverPromise: Promise<T> };

type StubOutcome = { value: unknown } | { error: unknown };

const noop = () => undefined;

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}

function withStub<T>(promise: Promise<T>, stubPromise: Promise<unknown> = promise): MethodPromise<T> {
  stubPromise.catch(noop); // the caller may leave it: its rejection is the call's concern
  return Object.assign(promise, { stubPromise, serverPromise: promise });
}

type Settings = Required<Omit<DDPClientOptions, 'backoff'>> & { backoff: BackoffOptions };

export class DDPClient extends Emitter<ClientEvents> {
  /** The WebSocket URL in use. */
  readonly url: string;
  private readonly settings: Settings;
  private readonly store = new LocalStore();
  private readonly calls = new MethodTracker();
  private readonly stubs = new Map<string, Stub>();
  private readonly subscriptions = new SubscriptionRegistry((sub) => this.subscriptionStopped(sub));
  private currentStatus: ClientStatus = 'idle';
  private session: string | undefined;
  /** The session to resume on the next connection, and how many of its messages arrived. */
  private lastSession: string | undefined;
  private receivedCount = 0;
  /** The version proposed in `connect`: the preferred one until a server asks for another. */
  private version: string;
  private connection: Connection | undefined;
  private quiescence: Quiescence | undefined;
  private hadSession = false;
  private retries = 0;
  /** When the server last closed the connection saying it restarts (code 1012). */
  private serverRestartedAt: number | undefined;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private pendingConnect: Deferred<string> | undefined;
  private readonly reconnectHooks = new ListenerSet<[]>();
  /** Subscriptions stopped while disconnected: a resumed session still runs them. */
  private readonly pendingUnsubs = new Set<string>();
  /** Calls whose stub writes are undone once the next session's data is trusted. */
  private abandoned: string[] = [];
  /** Calls that got their result on a lost session: they finish when the new session's data is in. */
  private orphans: string[] = [];
  private user: string | null = null;
  /** Settles once the async stub running, and those queued behind it, have settled; undefined when none runs. */
  private asyncStubs: Promise<void> | undefined;

  constructor(url: string, options: DDPClientOptions = {}) {
    super();
    checkClientOptionNames(options);
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
        // Not while a call is outstanding, as Meteor's client: a message typed during the restart would go with the page.
        if (hotCodePush === 'reload') this.calls.whenIdle(reloadPage);
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

  /** The logged-in user's id as the client knows it (stubs see it as `this.userId`). */
  userId(): string | null {
    return this.user;
  }

  /** Records the logged-in user (AccountsClient calls it); emits `user` when it changes. */
  setUserId(userId: string | null): void {
    if (userId === this.user) return;
    this.user = userId;
    this.emit('user', userId);
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
   * The server is told to end the session at once (no resumption). Outstanding
   * method calls fail (nobody will answer them) and their stubs' writes are
   * undone; subscriptions and documents stay, and are brought up to date by
   * the next connect().
   */
  disconnect(): void {
    if (this.currentStatus === 'closed') return;
    const wasConnected = this.currentStatus === 'connected';
    if (wasConnected) this.connection?.send({ msg: 'disconnect' });
    this.lastSession = undefined;
    this.detach();
    this.close(ClientErrors.disconnected());
    if (wasConnected) this.emit('disconnected', { reason: 'client disconnect', willReconnect: false });
  }

  /**
   * Registers method stubs: each runs at once when its method is called, on
   * the local collections (see stubs.ts). A name can have one stub.
   */
  methods(stubs: Record<string, Stub>): void {
    for (const [name, stub] of Object.entries(stubs)) {
      if (typeof stub !== 'function') throw new TypeError(`The stub for '${name}' must be a function`);
      if (this.stubs.has(name)) throw new Error(`A stub for '${name}' is already registered`);
      this.stubs.set(name, stub);
    }
  }

  /**
   * Registers a typed stub for a method defined with `defineMethod`: it gets
   * the parameters as the caller passes them.
   */
  stub<D extends MethodDefinition>(method: D, stub: (this: StubInvocation, ...args: InputsOf<D>) => unknown): void {
    this.methods({ [method.name]: stub as Stub });
  }

  /**
   * Calls a method; see {@link apply}. A definition from `defineMethod` types the parameters and the result.
   * A function after the parameters is Meteor's callback: it gets `(error, result)` as well.
   */
  call<D extends MethodDefinition>(method: D, ...params: InputsOf<D>): MethodPromise<ResultOf<D>>;
  call<Result = unknown>(method: string, ...params: unknown[]): MethodPromise<Result>;
  call(method: string | MethodDefinition, ...params: unknown[]): MethodPromise<unknown> {
    const callback = takeMethodCallback(params);
    return reportTo(this.invoke(typeof method === 'string' ? method : method.name, params, {}), callback);
  }

  /** Meteor 3's name for {@link call}. */
  callAsync<D extends MethodDefinition>(method: D, ...params: InputsOf<D>): MethodPromise<ResultOf<D>>;
  callAsync<Result = unknown>(method: string, ...params: unknown[]): MethodPromise<Result>;
  callAsync(method: string, ...params: unknown[]): MethodPromise<unknown> {
    return this.call(method, ...params);
  }

  /**
   * Calls a method: runs its stub at once (if one is registered), then sends
   * it, now or on the next connection, in call order. Resolves with its result
   * once the server has also reported its writes done (`updated`) and they are
   * in the store; rejects with a DDPError. The promise also has Meteor 3's
   * `stubPromise` (the stub's outcome) and `serverPromise` (the same as the
   * call's). A stub that returns a promise (an async stub) may still write
   * after awaiting the local collections: the call is sent once it settles,
   * and later calls wait for it. Called from inside a stub, it only
   * runs the other method's stub and resolves with what that returns. A callback, after the options or in
   * their place, gets `(error, result)` as well (Meteor's).
   */
  apply<D extends MethodDefinition>(method: D, params: InputsOf<D>, options?: MethodOptions | MethodCallback, callback?: MethodCallback): MethodPromise<ResultOf<D>>;
  apply<Result = unknown>(method: string, params?: readonly unknown[], options?: MethodOptions | MethodCallback, callback?: MethodCallback): MethodPromise<Result>;
  apply(method: string | MethodDefinition, params: readonly unknown[] = [], options: MethodOptions | MethodCallback = {}, callback?: MethodCallback): MethodPromise<unknown> {
    if (typeof options === 'function') [options, callback] = [{}, options];
    checkMethodOptionNames(options);
    return reportTo(this.invoke(typeof method === 'string' ? method : method.name, params, options), callback);
  }

  /** Meteor 3's name for {@link apply}. */
  applyAsync<D extends MethodDefinition>(method: D, params: InputsOf<D>, options?: MethodOptions | MethodCallback, callback?: MethodCallback): MethodPromise<ResultOf<D>>;
  applyAsync<Result = unknown>(method: string, params?: readonly unknown[], options?: MethodOptions | MethodCallback, callback?: MethodCallback): MethodPromise<Result>;
  applyAsync(method: string | MethodDefinition, params?: readonly unknown[], options?: MethodOptions | MethodCallback, callback?: MethodCallback): MethodPromise<unknown> {
    return this.apply(method as string, params, options, callback);
  }

  /**
   * Runs `callback` on every reconnect to a new session, before the client
   * re-sends its calls and subscriptions (Meteor's `onReconnect`): a call made
   * there goes first, so a resume login precedes the subscriptions it affects.
   * Not called when the server resumes the session. Returns a remover.
   */
  onReconnect(callback: () => void): () => void {
    return this.reconnectHooks.add(callback);
  }

  /**
   * Subscribes to a publication, now or on the next connection. After the parameters, Meteor's callbacks
   * may follow: a function (onReady) or `{ onReady, onStop, onError }`.
   */
  subscribe<D extends PublicationDefinition>(publication: D, ...params: InputsOf<D>): Subscription;
  subscribe(name: string, ...params: unknown[]): Subscription;
  subscribe(publication: string | PublicationDefinition, ...params: unknown[]): Subscription {
    const name = typeof publication === 'string' ? publication : publication.name;
    const callbacks = takeSubscriptionCallbacks(params);
    const subscription = this.subscriptions.create(name, params.map(clone));
    listen(subscription, callbacks);
    if (this.currentStatus === 'connected') this.sendSubscription(subscription);
    return subscription;
  }

  /** The local copy of a collection (empty until the server sends documents). */
  collection<T extends object = Document>(name: string): LocalCollection<T> {
    // The server decides what documents look like; T is the caller's description of it.
    return this.store.collection(name) as unknown as LocalCollection<T>;
  }

  private invoke(method: string, params: readonly unknown[], options: MethodOptions): MethodPromise<unknown> {
    this.store.flushWrites(); // observers see the server's data before the stub's guess
    const stub = this.stubs.get(method);
    const enclosing = this.store.stub as Simulation | undefined;
    if (enclosing) {
      const nested = new Simulation(method, enclosing.methodId, this.user, enclosing, (...write) => this.store.held.track(...write));
      return withStub(Promise.resolve(stub ? this.runStub(nested, stub, params) : undefined));
    }
    if (this.currentStatus === 'closed') return withStub(Promise.reject(ClientErrors.notConnected()), Promise.resolve());
    const ahead = this.asyncStubs;
    if (!ahead) return this.start(method, stub, params, options);
    // Behind an async stub still running: this stub runs, and this call is sent, after it (Meteor 3 queues them too).
    // Boxed: a promise would be flattened into its result.
    const started = ahead.then(() => ({ call: this.start(method, stub, params, options) }));
    this.queueStub(started.then(({ call }) => call.stubPromise.then(noop, noop)));
    return withStub(
      started.then(({ call }) => call),
      started.then(({ call }) => call.stubPromise),
    );
  }

  /** Runs the call's stub, then sends it: at once after a synchronous stub, once it has settled after an async one. */
  private start(method: string, stub: Stub | undefined, params: readonly unknown[], options: MethodOptions): MethodPromise<unknown> {
    // A copy, as Meteor takes: the call may be re-sent after the caller changed its arguments.
    const message: MethodMessage = { msg: 'method', id: this.calls.reserveId(), method, params: params.map(clone) };
    if (!stub) return withStub(this.send(message, options, options.randomSeed), Promise.resolve());
    const simulation = new Simulation(method, message.id, this.user, undefined, (...write) => this.store.held.track(...write), options.randomSeed);
    // Queued before the stub runs, so before its continuations: an async stub is the running stub again for them.
    queueMicrotask(() => void (simulation.running && (this.store.stub = simulation)));
    let value: unknown;
    try {
      value = this.runStub(simulation, stub, params);
    } catch (error) {
      return this.stubSettled(message, options, simulation, { error });
    }
    if (!isThenable(value)) return this.stubSettled(message, options, simulation, { value });
    const settled = this.simulate(simulation, value);
    if (!this.asyncStubs) this.queueStub(settled.then(noop));
    return withStub(
      settled.then((outcome) => this.stubSettled(message, options, simulation, outcome)),
      settled.then((outcome) => ('error' in outcome ? Promise.reject(outcome.error as Error) : outcome.value)),
    );
  }

  /**
   * An async stub stays the running stub, its writes its own, until its promise settles: its continuations
   * after awaiting the local collections run before any other task. One still running at the next task
   * awaits something else (the network): it is ended there, and what it writes later is refused.
   */
  private simulate(simulation: Simulation, value: PromiseLike<unknown>): Promise<StubOutcome> {
    return new Promise((resolve) => {
      const end = (outcome: StubOutcome) => {
        if (!simulation.running) return;
        simulation.running = false;
        clearTimeout(timer);
        if (this.store.stub === simulation) this.store.stub = undefined;
        resolve(outcome);
      };
      const timer = setTimeout(() => end({ error: new Error('still running at the next task: a stub may await only local collections') }), 0);
      value.then((result) => end({ value: result }), (error: unknown) => end({ error }));
    });
  }

  private stubSettled(message: MethodMessage, options: MethodOptions, simulation: Simulation, outcome: StubOutcome): MethodPromise<unknown> {
    simulation.running = false;
    const stubPromise = 'error' in outcome ? Promise.reject(outcome.error as Error) : Promise.resolve(outcome.value);
    if ('error' in outcome && options.throwStubExceptions) {
      this.store.release(message.id);
      return withStub(stubPromise, stubPromise);
    }
    if ('error' in outcome) this.stubFailed(message.method, outcome.error);
    return withStub(this.send(message, options, simulation.usedSeed), stubPromise);
  }

  private send(message: MethodMessage, options: MethodOptions, seed: string | undefined): Promise<unknown> {
    if (this.currentStatus === 'closed') {
      this.store.release(message.id); // closed while an async stub ran
      return Promise.reject(ClientErrors.notConnected());
    }
    if (seed !== undefined) message.randomSeed = seed;
    const promise = this.calls.add(message, options);
    this.sendMethods();
    return promise;
  }

  private queueStub(tail: Promise<void>): void {
    this.asyncStubs = tail;
    void tail.then(() => {
      if (this.asyncStubs === tail) this.asyncStubs = undefined;
    });
  }

  private runStub(simulation: Simulation, stub: Stub, params: readonly unknown[]): unknown {
    const previous = this.store.stub;
    this.store.stub = simulation;
    try {
      return this.store.inBatch(() => stub.apply(simulation, params.map(clone)));
    } finally {
      this.store.stub = previous;
    }
  }

  private stubFailed(method: string, error: unknown): void {
    const message = error instanceof Error ? error.message : String(error);
    const failure = new Error(`Exception while simulating the effect of invoking '${method}': ${message}`, { cause: error });
    // With nobody listening it would go unnoticed: logged, as Meteor logs it, with the stub's own stack.
    if (this.listens('error')) this.emit('error', failure);
    else console.error(failure.message, error);
  }

  private setStatus(status: ClientStatus): void {
    if (status === this.currentStatus) return;
    this.currentStatus = status;
    this.emit('status', status);
  }

  private open(): void {
    clearTimeout(this.retryTimer);
    const { url, settings } = this;
    const resume = this.lastSession === undefined ? undefined : { session: this.lastSession, receivedCount: this.receivedCount };
    this.connection = new Connection(
      {
        url,
        WebSocket: settings.WebSocket,
        version: this.version,
        support: settings.versions,
        resume,
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
    const resumed = this.hadSession && session === this.lastSession;
    this.session = this.lastSession = session;
    this.retries = 0;
    this.serverRestartedAt = undefined;
    if (!resumed) this.receivedCount = 1; // its `connected`
    // Before the status says connected, so that calls the hooks make queue up in front.
    if (!resumed && this.hadSession) this.prepareNewSession();
    this.setStatus('connected');
    if (this.currentStatus !== 'connected') return; // a status listener disconnected
    if (resumed) this.resumed();
    else this.sendAll(this.hadSession);
    this.hadSession = true;
    this.pendingConnect?.resolve(session);
    this.pendingConnect = undefined;
    this.emit('connected', session, resumed);
    if (this.quiescence?.complete) this.finishQuiescence();
  }

  /** The server kept the session: tell it what changed meanwhile; it replays what was missed. */
  private resumed(): void {
    for (const id of this.pendingUnsubs) this.connection?.send({ msg: 'unsub', id });
    this.pendingUnsubs.clear();
    this.sendMethods();
    // Subscriptions not yet ready on this session (a fresh session's re-sent ones included) may have been lost
    // on the way; the server ignores repeated ids.
    for (const subscription of this.subscriptions.all()) {
      if (!subscription.isReady || this.quiescence?.awaits(subscription.id)) this.sendSubscription(subscription);
    }
    for (const id of this.abandoned.splice(0)) this.store.release(id);
  }

  /**
   * A new session: its data is held until it has caught up (quiescence.ts),
   * calls without a result run again, and the reconnect hooks' calls go first.
   */
  private prepareNewSession(): void {
    this.pendingUnsubs.clear();
    this.orphans.push(...this.calls.newSession());
    this.quiescence = new Quiescence(true, this.subscriptions.readyIds(), []);
    const queued = this.calls.takeBlocks();
    this.reconnectHooks.notify();
    this.calls.restoreBlocks(queued);
  }

  private sendAll(waitForAll = false): void {
    this.sendMethods(waitForAll);
    for (const subscription of this.subscriptions.all()) this.sendSubscription(subscription);
  }

  /** Sends the calls that may go now; `wait` calls (and with `waitForAll`, every call) hold the data back. */
  private sendMethods(waitForAll = false): void {
    if (this.currentStatus !== 'connected') return;
    for (const message of this.calls.sendable()) {
      this.connection?.send(message);
      const wait = this.calls.markSent(message.id);
      if (!wait && !waitForAll) continue;
      if (this.quiescence) this.quiescence.waitForMethod(message.id);
      else this.quiescence = new Quiescence(false, [], [message.id]);
    }
  }

  private versionRefused(version: string): void {
    this.connection = undefined;
    // Retry at once with the server's choice, unless it is the version it just refused.
    if (version !== this.version && this.settings.versions.includes(version)) {
      this.version = version;
      this.open();
      return;
    }
    const error = ClientErrors.versionMismatch({ version });
    this.close(error);
    this.emit('error', error);
  }

  private connectionLost(reason: string, code?: number): void {
    const wasConnected = this.currentStatus === 'connected';
    this.detach();
    if (code === SERVER_RESTART_CODE) this.serverRestartedAt = Date.now();
    if (this.settings.autoReconnect) {
      // A server that said it restarts (`perseid dev`) is back in a moment: try every RESTART_RETRY_MS for a while.
      const restarting = this.serverRestartedAt !== undefined && Date.now() - this.serverRestartedAt < RESTART_WINDOW_MS;
      const delay = restarting ? RESTART_RETRY_MS : retryDelay(this.retries++, this.settings.backoff);
      this.retryTimer = setTimeout(() => this.open(), delay);
      this.setStatus('waiting');
    } else {
      this.close(ClientErrors.connectionLost({ reason }));
    }
    // Read the status again: a status listener may have called disconnect().
    if (wasConnected) this.emit('disconnected', { reason, code, willReconnect: this.currentStatus === 'waiting' });
  }

  /** Drops the connection; calls, subscriptions, documents and held data stay for the next one. */
  private detach(): void {
    this.store.flushWrites();
    this.connection?.close();
    this.connection = undefined;
    this.session = undefined;
    this.abandoned.push(...this.calls.connectionLost());
  }

  /** Stops for good (until connect()): nothing outstanding will be answered. */
  private close(error: DDPError): void {
    clearTimeout(this.retryTimer);
    this.calls.failAll(error);
    this.quiescence = undefined;
    this.abandoned = [];
    this.orphans = [];
    this.store.releaseAll();
    this.pendingConnect?.reject(error);
    this.pendingConnect = undefined;
    this.setStatus('closed');
  }

  private received(message: ServerMessage): void {
    // As Meteor 3.5's client: every message but pings and pongs, a resumed session's `connected` too.
    if (message.msg !== 'ping' && message.msg !== 'pong') this.receivedCount++;
    this.emit('message', message);
    if (isDocumentMessage(message) && !this.quiescence) {
      this.store.applyBuffered(message);
      return;
    }
    // Anything else may let the application look (a `ready`, a call's result): observers first.
    this.store.flushWrites();
    switch (message.msg) {
      case 'added':
      case 'changed':
      case 'removed':
      case 'addedBefore':
      case 'movedBefore':
      case 'ready':
      case 'nosub':
      case 'updated':
        // Known at once, held or not: a call sent again to a resumed session gets no second `updated`.
        if (message.msg === 'updated') for (const id of message.methods) this.calls.updateArrived(id);
        if (!this.quiescence) {
          this.applyData(message);
          break;
        }
        this.quiescence.hold(message);
        if (this.quiescence.complete && this.currentStatus === 'connected') this.finishQuiescence();
        break;
      case 'result':
        this.calls.result(message);
        this.sendMethods();
        break;
      case 'error':
        this.emit('error', ClientErrors.serverError({ reason: message.reason }, message.offendingMessage));
        break;
    }
  }

  private applyData(message: DataMessage): void {
    const sent = (id: string) => this.calls.isSent(id);
    switch (message.msg) {
      case 'ready':
        this.store.held.whenReleased(() => this.subscriptions.ready(message.subs), sent);
        break;
      case 'nosub':
        this.subscriptions.nosub(message.id, message.error && DDPError.fromJSON(message.error));
        break;
      case 'updated':
        for (const id of message.methods) {
          this.store.release(id);
          this.store.held.whenReleased(() => {
            this.calls.dataVisible(id);
            this.sendMethods();
          }, sent);
        }
        break;
      default:
        this.store.apply(message);
    }
  }

  /** Applies what was held: after a new session, as a switch of the whole store to its data. */
  private finishQuiescence(): void {
    const quiescence = this.quiescence!;
    this.quiescence = undefined;
    const held = quiescence.messages;
    this.store.inBatch(() => {
      if (!quiescence.reset) {
        for (const message of held) this.applyData(message);
        return;
      }
      this.store.reset(held.filter(isDocumentMessage));
      for (const message of held) if (!isDocumentMessage(message)) this.applyData(message);
      for (const id of [...this.abandoned.splice(0), ...this.orphans]) this.store.release(id);
      this.calls.finishOrphans(this.orphans.splice(0));
    });
    this.sendMethods();
  }

  private sendSubscription({ id, name, params }: Subscription): void {
    this.connection?.send({ msg: 'sub', id, name, params: [...params] });
  }

  private subscriptionStopped(subscription: Subscription): void {
    if (this.currentStatus === 'connected') this.connection?.send({ msg: 'unsub', id: subscription.id });
    else if (this.lastSession !== undefined) this.pendingUnsubs.add(subscription.id);
    if (!this.quiescence) return;
    this.quiescence.forgetSubscription(subscription.id);
    if (this.quiescence.complete && this.currentStatus === 'connected') this.finishQuiescence();
  }
}
