/**
 * One client connection speaking DDP (DDP notes §1): handshake, heartbeats, and
 * an ordered queue of messages where a method holds the queue until it returns
 * (or calls `this.unblock()`) and a subscription until its initial data is sent.
 *
 * Bounded and contained: the queue stops reading from the client when full
 * (or drops a client that cannot be paused); a method's reply or a
 * subscription's initial data is not built while the client has not read what
 * it already has; a long queue yields to other connections; an unexpected
 * exception closes this session only.
 */
import { EncodedMessage, encodeMessage } from '../ddp/encoded.js';
import { defineError, Errors, toClientError, type DDPError } from '../ddp/errors.js';
import {
  negotiateVersion,
  parseClientMessage,
  ProtocolErrors,
  type ClientMessage,
  type DDPVersion,
  type MethodMessage,
  type ServerMessage,
  type SubMessage,
} from '../ddp/messages.js';
import { Random, RandomStream } from '../ddp/random.js';
import type { Logger } from '../log.js';
import { WriteFence } from '../reactive/write-fence.js';
import { runInWriteScope } from '../reactive/write-scope.js';
import type { DdpSocket } from '../transport/socket.js';
import { clientAddress, exposedHeaders, type ConnectionHandle } from './connection-handle.js';
import type { DispatchEvent } from './dispatch-hooks.js';
import { Heartbeat } from './heartbeat.js';
import { MergeBox, type PublicationStrategy } from './merge-box.js';
import { MethodInvocation, type MethodHandler } from './method-invocation.js';
import { methodTimes, sessionMetrics } from './server-metrics.js';
import { Subscription, type PublishHandler, type SubscriptionHost } from './subscription.js';

export interface SessionSettings {
  heartbeatInterval: number;
  heartbeatTimeout: number;
  /** A socket that has not sent `connect` by then is closed (Meteor: 45 s). */
  handshakeTimeout: number;
  /** Stop reading from a client with this many messages (or bytes) waiting to run; read again at a tenth. */
  inboundHighWater: number;
  inboundHighWaterBytes: number;
  /** A client past this many waiting messages (or bytes) gets an error and is dropped (reading may not pause in time, or at all: SockJS polling). */
  inboundLimit: number;
  inboundLimitBytes: number;
  maxMessageSize: number;
  /** Subscriptions one connection may hold at once. */
  maxSubscriptions: number;
  /** How long a reply may wait for its client to read earlier output before the client is dropped as too slow. */
  writableWaitMs: number;
  /** Proxies in front of the server: the client's address is then read from X-Forwarded-For. */
  forwardedCount: number;
}

/** A subscription beyond the connection's limit. */
const TOO_MANY_SUBSCRIPTIONS = defineError('TOO_MANY_SUBSCRIPTIONS', 429, 'Too many subscriptions on one connection (the limit is {limit})', ['nosub']);

/** A backlog yields to other connections after this long, so one client's pipeline cannot starve the rest. */
const SLICE_MS = 5;

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** What sessions need from the server that owns them. */
export interface SessionServer {
  readonly settings: SessionSettings;
  readonly log: Logger;
  method(name: string): MethodHandler | undefined;
  publication(name: string): PublishHandler | undefined;
  universalPublications(): readonly PublishHandler[];
  /** Runs the server's dispatch hooks; rejects (or throws) to refuse the call. */
  dispatching(event: DispatchEvent): Promise<void> | undefined;
  strategyOf(collection: string): PublicationStrategy;
  sessionOpened(session: Session): void;
  sessionClosed(session: Session): void;
}

type QueueTask = { message: ClientMessage; bytes: number };

export class Session implements SubscriptionHost {
  id = '';
  version: DDPVersion | undefined;
  userId: string | null = null;
  readonly mergeBox: MergeBox;
  readonly connection: ConnectionHandle;
  readonly log: Logger;

  private state: 'handshake' | 'open' | 'closed' = 'handshake';
  private readonly subscriptions = new Map<string, Subscription>();
  private universal: Subscription[] = [];
  private queue: QueueTask[] = [];
  private queuedBytes = 0;
  private running = false;
  private paused = false;
  private readonly heartbeat: Heartbeat;
  private handshakeTimer: NodeJS.Timeout | undefined;
  private readonly closeCallbacks: Array<() => void> = [];

  constructor(
    readonly socket: DdpSocket,
    private readonly server: SessionServer,
  ) {
    this.log = server.log;
    this.mergeBox = new MergeBox((message) => this.socket.send(message), (collection) => server.strategyOf(collection));
    const sessionId = () => this.id;
    this.connection = {
      get id() {
        return sessionId();
      },
      clientAddress: clientAddress(socket.remoteAddress, socket.headers, server.settings.forwardedCount + socket.ownProxies),
      httpHeaders: exposedHeaders(socket.headers),
      onClose: (callback) => {
        if (this.state === 'closed') callback();
        else this.closeCallbacks.push(callback);
      },
      close: () => this.socket.close(),
    };
    const { settings } = server;
    this.heartbeat = new Heartbeat({
      interval: settings.heartbeatInterval,
      timeout: settings.heartbeatTimeout,
      sendPing: () => this.send({ msg: 'ping' }),
      onTimeout: () => {
        this.log.debug('closing a connection that stopped answering heartbeats', { session: this.id });
        this.socket.close();
      },
    });
    this.handshakeTimer = setTimeout(() => this.socket.close(), settings.handshakeTimeout);
    socket.setHandlers({
      message: (text) => this.contained(() => this.receive(text)),
      refused: (reason) => this.contained(() => this.sendError(reason)),
      close: () => this.closed(),
    });
    sessionMetrics.sockets.inc();
  }

  send(message: ServerMessage): void {
    if (this.state !== 'closed') this.socket.send(encodeMessage(message));
  }

  sendEncoded(message: EncodedMessage): void {
    if (this.state !== 'closed') this.socket.send(message);
  }

  subscriptionStopped(subscription: Subscription): void {
    if (subscription.id !== undefined && this.subscriptions.get(subscription.id) === subscription) {
      this.subscriptions.delete(subscription.id);
    }
    this.universal = this.universal.filter((s) => s !== subscription);
  }

  /** Logs in as `userId` (or out) and re-runs every subscription for the new user. */
  async setUserId(userId: string | null): Promise<void> {
    if (userId === this.userId) return;
    this.userId = userId;
    await this.rerunSubscriptions();
  }

  get subscriptionCount(): number {
    return this.subscriptions.size + this.universal.length;
  }

  // ---- receiving ----

  /**
   * Runs `work` for this session alone: an exception that escapes it means this
   * session's state can no longer be trusted, so it is logged and this
   * connection closed; the server and every other client carry on.
   */
  private contained(work: () => void): void {
    try {
      work();
    } catch (error) {
      this.log.error('unexpected failure while handling a message; closing the connection', { session: this.id || undefined, error });
      this.socket.terminate();
    }
  }

  private sendError(reason: string, offendingMessage?: unknown): void {
    const message: ServerMessage = offendingMessage === undefined ? { msg: 'error', reason } : { msg: 'error', reason, offendingMessage };
    this.send(message);
  }

  private receive(text: string): void {
    if (this.state === 'closed') return;
    this.heartbeat.messageReceived();
    sessionMetrics.messagesIn.inc();
    const parsed = parseClientMessage(text);
    if ('rejection' in parsed) {
      const { reason, offendingMessage } = parsed.rejection;
      const named = typeof (offendingMessage as { msg?: unknown } | undefined)?.msg === 'string';
      if (this.state === 'handshake' && named && (offendingMessage as { msg: string }).msg !== 'connect') {
        this.sendError(ProtocolErrors.mustConnectFirst(), offendingMessage);
      } else {
        this.sendError(reason, offendingMessage);
      }
      return;
    }
    const { message, echo } = parsed;
    if (message.msg === 'connect') {
      if (this.state === 'open') this.sendError(ProtocolErrors.alreadyConnected(), echo);
      else this.connect(message);
      return;
    }
    if (this.state !== 'open') {
      this.sendError(ProtocolErrors.mustConnectFirst(), echo);
      return;
    }
    if (message.msg === 'ping' || message.msg === 'pong') {
      // Meteor's `pre1` predates heartbeats; ping and pong are then unknown messages.
      if (this.version === 'pre1') this.sendError(ProtocolErrors.badRequest(), echo);
      else if (message.msg === 'ping') this.send(message.id === undefined ? { msg: 'pong' } : { msg: 'pong', id: message.id });
      return;
    }
    this.enqueue(message, text.length);
  }

  private connect(message: Extract<ClientMessage, { msg: 'connect' }>): void {
    const outcome = negotiateVersion(message);
    if ('failed' in outcome) {
      this.send({ msg: 'failed', version: outcome.failed });
      // Whatever the client pipelined after this connect is ignored (it will reconnect).
      this.state = 'closed';
      this.socket.close();
      return;
    }
    clearTimeout(this.handshakeTimer);
    this.handshakeTimer = undefined;
    this.version = outcome.accepted;
    this.id = Random.id();
    this.state = 'open';
    this.send({ msg: 'connected', session: this.id });
    if (this.version !== 'pre1') this.heartbeat.start();
    this.server.sessionOpened(this);
    for (const handler of this.server.universalPublications()) {
      const subscription = new Subscription(this, undefined, null, [], handler);
      this.universal.push(subscription);
      void subscription.run();
    }
  }

  private enqueue(message: ClientMessage, bytes: number): void {
    const { inboundHighWater, inboundHighWaterBytes, inboundLimit, inboundLimitBytes } = this.server.settings;
    if (this.queue.length >= inboundLimit || this.queuedBytes + bytes > inboundLimitBytes) {
      this.log.warn('dropping a client that sends faster than it can be served', { session: this.id, queued: this.queue.length, bytes: this.queuedBytes });
      this.sendError(ProtocolErrors.tooManyWaiting());
      this.socket.close();
      return;
    }
    this.queue.push({ message, bytes });
    this.queuedBytes += bytes;
    if (!this.paused && (this.queue.length >= inboundHighWater || this.queuedBytes >= inboundHighWaterBytes)) {
      this.paused = true;
      this.socket.pause();
    }
    if (!this.running) void this.runQueue();
  }

  private async runQueue(): Promise<void> {
    this.running = true;
    const { inboundHighWater, inboundHighWaterBytes, writableWaitMs } = this.server.settings;
    let sliceStart = performance.now();
    while (this.queue.length > 0 && this.state === 'open') {
      const { message, bytes } = this.queue.shift()!;
      this.queuedBytes -= bytes;
      if (this.paused && this.queue.length <= inboundHighWater / 10 && this.queuedBytes <= inboundHighWaterBytes / 10) {
        this.paused = false;
        this.socket.resume();
      }
      // A reply or initial data is built only once the client has read what it has.
      if (message.msg !== 'unsub' && !this.socket.writable) {
        sessionMetrics.outputWaits.inc();
        const outcome = await this.socket.whenWritable(writableWaitMs);
        if (outcome !== 'writable') {
          if (outcome === 'timeout') {
            this.log.warn('dropping a client that does not read its replies', { session: this.id, buffered: this.socket.bufferedBytes });
            this.socket.terminate();
          }
          break;
        }
      }
      await this.dispatch(message);
      if (performance.now() - sliceStart >= SLICE_MS) {
        await yieldToEventLoop();
        sliceStart = performance.now();
      }
    }
    this.running = false;
  }

  /** Runs one message; resolves when the queue may move on (done, or unblocked). */
  private dispatch(message: ClientMessage): Promise<void> | void {
    switch (message.msg) {
      case 'method':
        return this.blockingUntilUnblocked((unblock) => this.runMethod(message, unblock));
      case 'sub':
        return this.blockingUntilUnblocked((unblock) => this.startSubscription(message, unblock));
      case 'unsub':
        this.stopSubscription(message.id);
        return;
      default:
        return;
    }
  }

  private blockingUntilUnblocked(work: (unblock: () => void) => Promise<void>): Promise<void> {
    return new Promise((resolve) => {
      work(resolve).then(resolve, (error: unknown) => {
        this.log.error('unexpected failure while handling a message', { session: this.id, error });
        resolve();
      });
    });
  }

  // ---- methods ----

  private async runMethod(message: MethodMessage, unblock: () => void): Promise<void> {
    sessionMetrics.methods.inc();
    const handler = this.server.method(message.method);
    if (!handler) {
      this.send({ msg: 'result', id: message.id, error: Errors.methodNotFound({ name: message.method }).toJSON() });
      this.send({ msg: 'updated', methods: [message.id] });
      return;
    }
    const fence = new WriteFence();
    const started = performance.now();
    const randomStream = message.randomSeed === undefined ? undefined : new RandomStream(message.randomSeed);
    const invocation = new MethodInvocation(message.method, this.connection, this, unblock, message.randomSeed, randomStream);
    let reply: ServerMessage | EncodedMessage;
    try {
      const hooked = this.server.dispatching(this.dispatchEvent('method', message.method, message.params));
      if (hooked) await hooked;
      const result = await runInWriteScope({ fence, randomStream }, () => handler.apply(invocation, message.params));
      // Encoded here, so a result that cannot be serialised (too deep, a cycle) is this method's error.
      reply = encodeMessage(result === undefined ? { msg: 'result', id: message.id } : { msg: 'result', id: message.id, result });
    } catch (error) {
      const { error: clientError, expected } = toClientError(error);
      if (!expected) this.log.error('method failed', { method: message.method, session: this.id, error });
      else if (typeof clientError.error === 'number' && clientError.error >= 500) {
        this.log.warn('method failed', { method: message.method, reason: clientError.reason, detail: (error as { detail?: string }).detail });
      }
      reply = { msg: 'result', id: message.id, error: clientError.toJSON() };
    }
    methodTimes.record(performance.now() - started);
    if (reply instanceof EncodedMessage) this.sendEncoded(reply);
    else this.send(reply);
    fence.arm(() => this.send({ msg: 'updated', methods: [message.id] }));
  }

  // ---- subscriptions ----

  private async startSubscription(message: SubMessage, unblock: () => void): Promise<void> {
    if (this.subscriptions.has(message.id)) return; // a repeated sub (e.g. after a client reconnect) is ignored
    const limit = this.server.settings.maxSubscriptions;
    if (this.subscriptions.size >= limit) {
      this.send({ msg: 'nosub', id: message.id, error: TOO_MANY_SUBSCRIPTIONS({ limit }).toJSON() });
      return;
    }
    const handler = this.server.publication(message.name);
    if (!handler) {
      this.send({ msg: 'nosub', id: message.id, error: Errors.subscriptionNotFound({ name: message.name }).toJSON() });
      return;
    }
    try {
      const hooked = this.server.dispatching(this.dispatchEvent('subscription', message.name, message.params));
      if (hooked) await hooked;
    } catch (error) {
      this.send({ msg: 'nosub', id: message.id, error: this.refusal(error, message.name).toJSON() });
      return;
    }
    sessionMetrics.subscriptions.inc();
    const subscription = new Subscription(this, message.id, message.name, message.params, handler);
    this.subscriptions.set(message.id, subscription);
    await subscription.run(unblock);
  }

  private dispatchEvent(type: DispatchEvent['type'], name: string, params: readonly unknown[]): DispatchEvent {
    const { connection } = this;
    return { type, name, userId: this.userId, connectionId: this.id, clientAddress: connection.clientAddress, params, connection };
  }

  private refusal(error: unknown, name: string): DDPError {
    const { error: clientError, expected } = toClientError(error);
    if (!expected) this.log.error('a dispatch hook failed', { sub: name, session: this.id, error });
    return clientError;
  }

  private stopSubscription(id: string): void {
    const subscription = this.subscriptions.get(id);
    // Every unsub is answered, known or not: client libraries wait for it before resubscribing.
    if (subscription) subscription.deactivate(true);
    this.send({ msg: 'nosub', id });
  }

  private async rerunSubscriptions(): Promise<void> {
    const previous = [...this.subscriptions.values(), ...this.universal];
    // The new run starts before the old one stops, so documents both publish cause no message.
    await Promise.all(
      previous.map(async (old) => {
        if (old.isStopped) return;
        const fresh = new Subscription(this, old.id, old.name, old.params, old.handlerFunction, old.readySent);
        if (old.id !== undefined) this.subscriptions.set(old.id, fresh);
        else this.universal.push(fresh);
        await fresh.run();
        old.deactivate(true);
      }),
    );
  }

  // ---- closing ----

  private closed(): void {
    const wasOpen = this.state === 'open';
    this.state = 'closed';
    clearTimeout(this.handshakeTimer);
    this.heartbeat.stop();
    this.queue = [];
    this.queuedBytes = 0;
    sessionMetrics.sockets.dec();
    for (const subscription of [...this.subscriptions.values(), ...this.universal]) subscription.deactivate(false);
    this.subscriptions.clear();
    this.universal = [];
    for (const callback of this.closeCallbacks.splice(0)) {
      try {
        callback();
      } catch (error) {
        this.log.error('connection onClose callback failed', { session: this.id, error });
      }
    }
    if (wasOpen) this.server.sessionClosed(this);
  }
}
