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
 *
 * Resumable (Meteor 3.5): when the client goes away without closing the
 * connection (a lost network), the session stays, its socket parked, for a
 * grace period; a client that reconnects naming it and how many of its
 * messages it received gets the same session back and only what it missed
 * (resume-log.ts). A `disconnect` message, a close on purpose, the grace
 * period running out, or the held output passing the cap end it.
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
import { apm } from '../metrics/apm.js';
import { withCallSpan } from '../metrics/otel.js';
import type { Trace } from '../metrics/trace.js';
import type { InputBudget, InputHolder } from '../transport/input-budget.js';
import type { OutputBudget } from '../transport/output-budget.js';
import type { DdpSocket } from '../transport/socket.js';
import { addressGroup } from './address-group.js';
import { clientAddress, exposedHeaders, type ConnectionHandle } from './connection-handle.js';
import type { DispatchEvent } from './dispatch-hooks.js';
import { Heartbeat } from './heartbeat.js';
import { MergeBox, type PublicationStrategy } from './merge-box.js';
import { MethodInvocation, type MethodHandler } from './method-invocation.js';
import { ParkedSocket } from './parked-socket.js';
import { ResumeLog } from './resume-log.js';
import { methodTimes, sessionMetrics } from './server-metrics.js';
import { Subscription, type PublishHandler, type SubscriptionHost } from './subscription.js';
import type { SubscriptionBudget } from './subscription-budget.js';
import type { RefusalLog } from '../refusal-log.js';

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
  /** Session resumption: how long a session waits for its client to come back (0: not at all). */
  resumeGraceMs: number;
  /** Messages a session may hold for its client while it is away; past it the session ends. */
  resumeMaxMessages: number;
  /** Characters it may hold meanwhile (the connection's output cap). */
  resumeMaxBytes: number;
  /** Characters of the last messages kept while the client is connected, to send again what a dropped socket lost. */
  resumeTailBytes: number;
}

/** A subscription beyond the connection's limit. */
const TOO_MANY_SUBSCRIPTIONS = defineError('TOO_MANY_SUBSCRIPTIONS', 429, 'Too many subscriptions on one connection (the limit is {limit})', ['nosub']);
const SERVER_SUBSCRIPTION_LIMIT = defineError('SERVER_SUBSCRIPTION_LIMIT', 503, 'The server holds as many subscriptions as it may (the limit is {limit}): try again later', ['nosub']);
const ADDRESS_SUBSCRIPTION_LIMIT = defineError('ADDRESS_SUBSCRIPTION_LIMIT', 429, 'Too many subscriptions from your address (the limit is {limit})', ['nosub']);

/**
 * Arguments a method or publication may be called with: they are spread into
 * the handler's call, and a spread of about 120,000 overflows the stack.
 */
const MAX_PARAMS = 10_000;
const TOO_MANY_PARAMS = defineError('TOO_MANY_PARAMS', 400, 'Too many arguments ({count}; the limit is {limit})', ['result', 'nosub']);

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
  /** The server-wide budget of unsent output, which a session holding output for an absent client counts in. */
  readonly outputBudget: OutputBudget;
  /** The server-wide budget of incoming bytes, which the messages waiting in a session's queue count in. */
  readonly inputBudget: InputBudget;
  /** The server-wide budget of subscriptions, which each subscription a session holds counts in. */
  readonly subscriptionBudget: SubscriptionBudget;
  /** Methods that failed with a server error (5xx) they meant to give (a database that is down): logged at most once a minute, with how many. */
  readonly methodFailures: RefusalLog;
  sessionOpened(session: Session): void;
  sessionClosed(session: Session): void;
  /** The session's client went away; the session waits for it (the server bounds how many wait). */
  sessionParked(session: Session): void;
  /** It came back. */
  sessionUnparked(session: Session): void;
  /** One of the session's sockets closed (the server's per-socket bookkeeping). */
  socketClosed(socket: DdpSocket): void;
  /** Hands `socket` to the session `sessionId` if it is open here and can resume from `receivedCount`. */
  resume(sessionId: string, receivedCount: number, socket: DdpSocket, version: DDPVersion): boolean;
}

/** `at`: performance.now() when it arrived, for the APM's `wait`. */
type QueueTask = { message: ClientMessage; bytes: number; at: number };

/** Queued messages looked at to charge `waitedOn` (the queue is usually short; this bounds the cost when it is not). */
const WAITED_ON_SCAN = 256;

export class Session implements SubscriptionHost, InputHolder {
  // What output() reads for every message, declared first so that it shares the object's first cache lines.
  private state: 'handshake' | 'open' | 'closed' = 'handshake';
  /** It held more output for its absent client than allowed: it ends, and cannot be resumed. */
  private overflowed = false;
  /** Messages counted so far: the resume log's count, and those the socket has not yet handed to it. */
  private outputs = 0;
  /** `current` while the client is away (a field, not an instanceof test: output reads it for every message). */
  private away: ParkedSocket | undefined;
  private current: DdpSocket;
  private readonly sent: ResumeLog;
  /** A socket's `sent` handler: what it wrote or dropped goes to the resume log. */
  private readonly recordSent = (messages: EncodedMessage[], chars: number): void => this.sent.recordBatch(messages, chars);

  id = '';
  version: DDPVersion | undefined;
  userId: string | null = null;
  readonly mergeBox: MergeBox;
  readonly connection: ConnectionHandle;
  /** The client's address group (an IPv6 /64), whose share of the server's subscriptions this session's count in. */
  private readonly addressGroup: string;
  readonly log: Logger;
  /** Methods running now (a repeated call after a resume is not run twice). */
  private readonly runningMethods = new Set<string>();
  /** Methods answered whose `updated` has not gone yet. */
  private unfenced = 0;
  /** Set by closeWhenIdle: the close to make once no method is in flight. */
  private closingWhenIdle: { code: number; reason: string } | undefined;
  private resumes = 0;
  /** The client said `disconnect`, or the server closes on purpose: no grace period. */
  private leaving = false;
  /** The heartbeat found the client unresponsive: its socket counts as lost, not closed. */
  private lostSocket = false;
  private graceTimer: NodeJS.Timeout | undefined;
  private readonly subscriptions = new Map<string, Subscription>();
  private universal: Subscription[] = [];
  private queue: QueueTask[] = [];
  /** Characters of the messages waiting in `queue` (InputBudget). */
  heldBytes = 0;
  private running = false;
  private paused = false;
  private readonly heartbeat: Heartbeat;
  private handshakeTimer: NodeJS.Timeout | undefined;
  private readonly closeCallbacks: Array<() => void> = [];
  /** The APM trace of the message holding the queue now, charged for the time later messages wait. */
  private blocking: Trace | undefined;

  constructor(
    socket: DdpSocket,
    private readonly server: SessionServer,
  ) {
    this.log = server.log;
    this.current = socket;
    const { settings } = server;
    this.sent = new ResumeLog(settings.resumeMaxMessages, settings.resumeTailBytes);
    this.mergeBox = new MergeBox(this, (collection) => server.strategyOf(collection));
    const sessionId = () => this.id;
    const isClosed = () => this.state === 'closed';
    this.connection = {
      get id() {
        return sessionId();
      },
      get closed() {
        return isClosed();
      },
      clientAddress: this.addressOf(socket),
      httpHeaders: exposedHeaders(socket.headers),
      onClose: (callback) => {
        if (this.state === 'closed') callback();
        else this.closeCallbacks.push(callback);
      },
      close: () => {
        this.leaving = true;
        this.socket.close();
      },
    };
    this.addressGroup = addressGroup(this.connection.clientAddress ?? '');
    this.heartbeat = new Heartbeat({
      interval: settings.heartbeatInterval,
      timeout: settings.heartbeatTimeout,
      sendPing: () => this.send({ msg: 'ping' }),
      onTimeout: () => {
        this.log.debug('closing a connection that stopped answering heartbeats', { session: this.id });
        this.lostSocket = true;
        this.socket.terminate();
      },
    });
    this.handshakeTimer = setTimeout(() => this.socket.close(), settings.handshakeTimeout);
    this.attach(socket);
    sessionMetrics.sockets.inc();
  }

  /** The socket in use: the client's, or while it is away, a parked one. */
  get socket(): DdpSocket {
    return this.current;
  }

  send(message: ServerMessage): void {
    const encoded = encodeMessage(message);
    if (message.msg === 'ping' || message.msg === 'pong') {
      // Heartbeats are per connection: not counted, not sent to an absent client.
      encoded.uncounted = true;
      if (this.state !== 'closed') this.socket.send(encoded);
      return;
    }
    // Before the handshake there is no session to resume.
    if (this.state !== 'open') encoded.uncounted = true;
    const ref = message.msg === 'result' ? `m:${message.id}` : message.msg === 'nosub' ? `s:${message.id}` : undefined;
    this.output(encoded, ref);
  }

  sendEncoded(message: EncodedMessage): void {
    this.output(message);
  }

  /**
   * Every message of the session goes out here: counted, then sent (the
   * socket hands what it sent to the resume log), or kept for the client while
   * it is away.
   */
  private output(message: EncodedMessage, ref?: string): void {
    if (this.state === 'closed' || this.overflowed) return;
    if (ref !== undefined && this.state === 'open') this.sent.answers(ref, this.outputs);
    if (!message.uncounted) this.outputs++;
    if (this.parked) {
      this.sent.record(message);
      const { resumeMaxMessages, resumeMaxBytes } = this.server.settings;
      if (this.sent.heldCount > resumeMaxMessages || this.sent.heldBytes > resumeMaxBytes) {
        this.log.debug('ending a session whose client is away: too much output held for it', { session: this.id, messages: this.sent.heldCount, bytes: this.sent.heldBytes });
        sessionMetrics.resumeOverflows.inc();
        // Not from inside whatever is publishing now: it ends once this turn is over, sending nothing more.
        this.overflowed = true;
        queueMicrotask(() => this.end());
        return;
      }
      this.server.outputBudget.changed();
      return;
    }
    this.socket.send(message);
  }

  private get parked(): boolean {
    return this.away !== undefined;
  }

  /** Takes `socket` as this session's connection: its messages and its close come here. */
  private attach(socket: DdpSocket): void {
    this.current = socket;
    this.away = undefined;
    socket.setHandlers({
      message: (text) => this.contained(() => this.receive(text)),
      refused: (reason) => this.contained(() => this.sendError(reason)),
      close: (abrupt) => this.socketClosed(socket, abrupt),
      sent: this.recordSent,
    });
  }

  subscriptionStopped(subscription: Subscription): void {
    if (subscription.id !== undefined && this.subscriptions.get(subscription.id) === subscription) {
      this.subscriptions.delete(subscription.id);
      this.server.subscriptionBudget.release(this.addressGroup);
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
    sessionMetrics.bytesIn.inc(text.length);
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
    if (message.msg === 'disconnect') {
      // Meteor 3.5: the client leaves on purpose; nothing to keep for it.
      this.leaving = true;
      this.socket.close();
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
      this.end();
      return;
    }
    clearTimeout(this.handshakeTimer);
    this.handshakeTimer = undefined;
    const { session, receivedCount } = message;
    if (typeof session === 'string' && typeof receivedCount === 'number' && this.server.settings.resumeGraceMs > 0) {
      if (this.server.resume(session, receivedCount, this.socket, outcome.accepted)) {
        // The socket now belongs to the resumed session: this object is done, without closing anything.
        this.state = 'closed';
        this.heartbeat.stop();
        return;
      }
    }
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

  private queued(delta: number): void {
    this.heldBytes += delta;
    this.server.inputBudget.adjust(this, delta);
  }

  dropOverInputBudget(): void {
    this.log.warn('dropping a client: the server holds too many incoming bytes', { session: this.id, queued: this.queue.length, bytes: this.heldBytes });
    this.socket.terminate();
    this.end();
  }

  private enqueue(message: ClientMessage, bytes: number): void {
    if (this.resumes > 0 && this.repeated(message)) return;
    const { inboundHighWater, inboundHighWaterBytes, inboundLimit, inboundLimitBytes } = this.server.settings;
    if (this.queue.length >= inboundLimit || this.heldBytes + bytes > inboundLimitBytes) {
      this.log.warn('dropping a client that sends faster than it can be served', { session: this.id, queued: this.queue.length, bytes: this.heldBytes });
      this.sendError(ProtocolErrors.tooManyWaiting());
      this.socket.close();
      return;
    }
    this.queue.push({ message, bytes, at: performance.now() });
    this.queued(bytes);
    if (!this.paused && (this.queue.length >= inboundHighWater || this.heldBytes >= inboundHighWaterBytes)) {
      this.paused = true;
      this.socket.pause();
    }
    if (!this.running) void this.runQueue();
  }

  private async runQueue(): Promise<void> {
    this.running = true;
    const socket = this.current;
    const { inboundHighWater, inboundHighWaterBytes, writableWaitMs } = this.server.settings;
    let sliceStart = performance.now();
    while (this.queue.length > 0 && this.state === 'open' && !this.closingWhenIdle) {
      const { message, bytes, at } = this.queue.shift()!;
      this.queued(-bytes);
      if (this.paused && this.queue.length <= inboundHighWater / 10 && this.heldBytes <= inboundHighWaterBytes / 10) {
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
          // The client went away: a session waiting for it runs this message when it comes back.
          this.queue.unshift({ message, bytes, at });
          this.queued(bytes);
          break;
        }
      }
      const dispatched = performance.now();
      this.blocking = undefined;
      await this.dispatch(message, at);
      if (this.blocking) this.chargeWaitedOn(this.blocking, dispatched);
      if (performance.now() - sliceStart >= SLICE_MS) {
        await yieldToEventLoop();
        sliceStart = performance.now();
      }
    }
    this.running = false;
    // Resumed while this run waited on the old socket: carry on with the new one. Only then: a socket
    // that is closed but whose close event has not come yet answers 'closed' at once, and running again
    // on it would spin in microtasks and starve that event (and the whole process) for ever.
    if (this.current !== socket && this.queue.length > 0 && this.state === 'open' && !this.parked) void this.runQueue();
  }

  /**
   * After a resume the client sends again what it has no answer for; what
   * this session already ran (a call running or answered, a subscription it
   * ended: the answer is among what the client missed) is not run twice.
   */
  private repeated(message: ClientMessage): boolean {
    if (message.msg !== 'method' && message.msg !== 'sub') return false;
    const waiting = this.queue.some((task) => task.message.msg === message.msg && task.message.id === message.id);
    if (message.msg === 'method') return waiting || this.runningMethods.has(message.id) || this.sent.mentions(`m:${message.id}`);
    return waiting || this.sent.mentions(`s:${message.id}`);
  }

  /** How long the messages still queued waited while `trace`'s message (dispatched at `since`) held the queue. */
  private chargeWaitedOn(trace: Trace, since: number): void {
    const now = performance.now();
    let waited = 0;
    const n = Math.min(this.queue.length, WAITED_ON_SCAN);
    for (let i = 0; i < n; i++) waited += now - Math.max(this.queue[i]!.at, since);
    apm.waitedOn(trace, waited);
  }

  /** Runs one message; resolves when the queue may move on (done, or unblocked). */
  private dispatch(message: ClientMessage, arrived: number): Promise<void> | void {
    switch (message.msg) {
      case 'method':
        return this.blockingUntilUnblocked((unblock) => this.runMethod(message, unblock, arrived));
      case 'sub':
        return this.blockingUntilUnblocked((unblock) => this.startSubscription(message, unblock, arrived));
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

  private async runMethod(message: MethodMessage, unblock: () => void, arrived: number): Promise<void> {
    sessionMetrics.methods.inc();
    this.runningMethods.add(message.id);
    try {
      await this.callMethod(message, unblock, arrived);
    } finally {
      this.runningMethods.delete(message.id);
      this.closeIfIdle();
    }
  }

  /**
   * Closes the client's connection once no method of it is running or waiting
   * for its `updated` (a drain): a call cut off before its result would be sent
   * again by the client to another server and run twice. Messages that come
   * meanwhile are left unread: the client sends them again after reconnecting.
   */
  closeWhenIdle(code: number, reason: string): void {
    this.closingWhenIdle = { code, reason };
    this.closeIfIdle();
  }

  private closeIfIdle(): void {
    const closing = this.closingWhenIdle;
    if (closing && this.runningMethods.size === 0 && this.unfenced === 0) this.socket.close(closing.code, closing.reason);
  }

  private async callMethod(message: MethodMessage, unblock: () => void, arrived: number): Promise<void> {
    const handler = this.server.method(message.method);
    if (!handler || message.params.length > MAX_PARAMS) {
      const error = handler ? TOO_MANY_PARAMS({ count: message.params.length, limit: MAX_PARAMS }) : Errors.methodNotFound({ name: message.method });
      this.send({ msg: 'result', id: message.id, error: error.toJSON() });
      this.send({ msg: 'updated', methods: [message.id] });
      return;
    }
    const fence = new WriteFence();
    const started = performance.now();
    const randomStream = message.randomSeed === undefined ? undefined : new RandomStream(message.randomSeed);
    const invocation = new MethodInvocation(message.method, this.connection, this, unblock, message.randomSeed, randomStream);
    const trace = apm.methodStarted(message.method, arrived, this.id, this.userId);
    this.blocking = trace;
    let failure: unknown;
    let reply: ServerMessage | EncodedMessage;
    try {
      const hooked = this.server.dispatching(this.dispatchEvent('method', message.method, message.params));
      if (hooked) await hooked;
      const scope = { fence, randomStream, trace };
      const result = await withCallSpan(trace?.span, () => runInWriteScope(scope, () => handler.apply(invocation, message.params)));
      // Encoded here, so a result that cannot be serialised (too deep, a cycle) is this method's error.
      reply = encodeMessage(result === undefined ? { msg: 'result', id: message.id } : { msg: 'result', id: message.id, result });
    } catch (error) {
      const { error: clientError, expected } = toClientError(error);
      if (!expected) this.log.error('method failed', { method: message.method, session: this.id, error });
      else if (typeof clientError.error === 'number' && clientError.error >= 500) {
        this.server.methodFailures.refusedOne({ method: message.method, reason: clientError.reason, detail: (error as { detail?: string }).detail });
      }
      reply = { msg: 'result', id: message.id, error: clientError.toJSON() };
      failure = error;
      apm.methodEnded(trace, error, expected);
    }
    if (failure === undefined) apm.methodEnded(trace);
    methodTimes.record(performance.now() - started);
    if (reply instanceof EncodedMessage) this.output(reply, `m:${message.id}`);
    else this.send(reply);
    this.unfenced++;
    fence.arm(() => {
      this.unfenced--;
      this.send({ msg: 'updated', methods: [message.id] });
      this.closeIfIdle();
    });
  }

  // ---- subscriptions ----

  private async startSubscription(message: SubMessage, unblock: () => void, arrived: number): Promise<void> {
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
    if (message.params.length > MAX_PARAMS) {
      this.send({ msg: 'nosub', id: message.id, error: TOO_MANY_PARAMS({ count: message.params.length, limit: MAX_PARAMS }).toJSON() });
      return;
    }
    try {
      const hooked = this.server.dispatching(this.dispatchEvent('subscription', message.name, message.params));
      if (hooked) await hooked;
    } catch (error) {
      this.send({ msg: 'nosub', id: message.id, error: this.refusal(error, message.name).toJSON() });
      return;
    }
    // Ended while a hook held it (one on Redis takes a round trip): a place taken now would never be given back.
    if (this.state === 'closed') return;
    const budget = this.server.subscriptionBudget;
    const refused = budget.take(this.addressGroup);
    if (refused) {
      const error = refused === 'server' ? SERVER_SUBSCRIPTION_LIMIT({ limit: budget.limit }) : ADDRESS_SUBSCRIPTION_LIMIT({ limit: budget.perAddress });
      this.send({ msg: 'nosub', id: message.id, error: error.toJSON() });
      return;
    }
    sessionMetrics.subscriptions.inc();
    const trace = apm.subStarted(message.name, arrived, this.id, this.userId);
    this.blocking = trace;
    const subscription = new Subscription(this, message.id, message.name, message.params, handler, false, trace);
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
    // As Meteor, the old runs end first (their stop callbacks run), but their documents stay until the
    // new run has published: documents both publish cause no message.
    for (const old of previous) old.retire();
    await Promise.all(
      previous.map(async (old) => {
        if (old.isStopped) return;
        const fresh = new Subscription(this, old.id, old.name, old.params, old.handlerFunction, old.readySent);
        if (old.id !== undefined) this.subscriptions.set(old.id, fresh);
        else this.universal.push(fresh);
        await fresh.run();
        old.deactivate(true, fresh);
      }),
    );
  }

  // ---- resuming and closing ----

  /**
   * A client reconnecting asks for this session back, with how many of its
   * messages it received: if this session can send it all it missed, it takes
   * the new socket, answers `connected` with its own id and sends what was
   * missed. Otherwise it says no (the client starts afresh), and ends if it
   * cannot serve the count; one closing, or still connected elsewhere, is left as it is.
   */
  resume(socket: DdpSocket, receivedCount: number, version: DDPVersion): boolean {
    // Not one that is closing on purpose (a `disconnect`, or the server's close: a logout by a removed
    // token) while its socket waits for the client's close frame, which a client can hold back.
    if (this.state !== 'open' || this.overflowed || this.leaving) return false;
    // A session whose client is still connected as far as this side knows is taken over only from the
    // client's own address: else anyone who learnt its id could take a live session (and its login) at any time.
    if (!this.parked && this.addressOf(socket) !== this.connection.clientAddress) return false;
    if (!this.parked) {
      // The client came back before this side noticed it had gone: the old socket is dead to it
      // (what it still queued goes to the resume log as it closes).
      const old = this.current;
      this.park();
      old.setHandlers({ message: () => undefined, refused: () => undefined, close: () => undefined, sent: this.recordSent });
      old.terminate();
      this.server.socketClosed(old);
    }
    const missed = version === this.version ? this.sent.missedSince(receivedCount) : undefined;
    if (!missed) {
      this.log.debug('a session cannot be resumed: the client missed more than was kept', { session: this.id, sent: this.sent.count, received: receivedCount });
      this.leaving = true;
      this.end();
      return false;
    }
    this.server.outputBudget.delete(this.away!);
    this.server.sessionUnparked(this);
    sessionMetrics.parked.dec();
    clearTimeout(this.graceTimer);
    this.graceTimer = undefined;
    this.sent.release(receivedCount);
    this.resumes++;
    this.lostSocket = false;
    this.paused = false;
    this.attach(socket); // counted in sockets by the session that received it
    sessionMetrics.resumed.inc();
    // Counted on both sides, as Meteor 3.5 does (its client counts every message but pings and pongs): it goes
    // before what the client missed, and the socket hands it to the resume log with them.
    this.outputs++;
    socket.send(encodeMessage({ msg: 'connected', session: this.id }));
    for (const message of missed) socket.send(message);
    if (this.version !== 'pre1') this.heartbeat.start();
    if (!this.running && this.queue.length > 0) void this.runQueue();
    this.log.debug('session resumed', { session: this.id, resent: missed.length, transport: socket.transport });
    return true;
  }

  private addressOf(socket: DdpSocket): string | undefined {
    return clientAddress(socket.remoteAddress, socket.headers, this.server.settings.forwardedCount + socket.ownProxies);
  }

  /** Ends the session whatever its state (the server is shutting down). */
  shutDown(): void {
    this.leaving = true;
    if (this.parked) this.end();
    else this.socket.terminate();
  }

  private socketClosed(socket: DdpSocket, abrupt: boolean): void {
    if (socket !== this.current) return; // an old socket, already replaced
    this.server.socketClosed(socket);
    const resumable = this.state === 'open' && !this.leaving && (abrupt || this.lostSocket) && this.server.settings.resumeGraceMs > 0;
    if (resumable) this.park();
    else this.end();
  }

  /** The client went away: hold what the session sends for it, for the grace period. */
  private park(): void {
    const parked = new ParkedSocket(this.current, () => this.sent.heldBytes, () => this.end());
    this.current = parked;
    this.away = parked;
    this.server.outputBudget.add(parked);
    sessionMetrics.sockets.dec();
    sessionMetrics.parked.inc();
    this.heartbeat.stop();
    // Messages the client sent that have not run wait for it (a repeat of one is recognised, see repeated()).
    this.sent.hold();
    this.server.sessionParked(this);
    this.graceTimer = setTimeout(() => {
      this.log.debug('ending a session whose client did not come back', { session: this.id });
      this.end();
    }, this.server.settings.resumeGraceMs);
    this.graceTimer.unref();
    this.log.debug('session waiting for its client to come back', { session: this.id, graceMs: this.server.settings.resumeGraceMs });
  }

  private end(): void {
    if (this.state === 'closed') return;
    const wasOpen = this.state === 'open';
    this.state = 'closed';
    clearTimeout(this.handshakeTimer);
    clearTimeout(this.graceTimer);
    this.heartbeat.stop();
    this.queue = [];
    this.queued(-this.heldBytes);
    if (this.parked) {
      this.server.outputBudget.delete(this.away!);
      this.server.sessionUnparked(this);
      sessionMetrics.parked.dec();
    } else {
      sessionMetrics.sockets.dec();
      this.current.close();
    }
    for (const subscription of [...this.subscriptions.values(), ...this.universal]) subscription.deactivate(false);
    this.server.subscriptionBudget.release(this.addressGroup, this.subscriptions.size);
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
