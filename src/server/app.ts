/**
 * The application server: methods, publications, and the HTTP server that
 * carries DDP (WebSocket and SockJS) next to static files and a health check.
 */
import { existsSync, statSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import type { Duplex } from 'node:stream';
import { getHeapStatistics } from 'node:v8';
import { AUTOUPDATE } from '../ddp/autoupdate.js';
import { encodeMessage } from '../ddp/encoded.js';
import { defineCloseReason } from '../ddp/errors.js';
import { ProtocolErrors } from '../ddp/messages.js';
import { createLogger, type Logger } from '../log.js';
import { parseAllowedOrigins, type AllowedOrigins } from '../transport/origins.js';
import { adminToken } from './admin-access.js';
import { AddressLimit, DEFAULT_CONNECTIONS_PER_ADDRESS, WaitingPerAddress } from './address-limit.js';
import { RefusalLog } from '../refusal-log.js';
import { defaultTotalSubscriptions, SubscriptionBudget } from './subscription-budget.js';
import { clientAddress, forwardedCountFromEnv } from './connection-handle.js';
import { UntrustedProxyWarning } from './proxy-warning.js';
import type { ConnectionRouter } from './connection-router.js';
import { FrontDoor } from './front-door.js';
import { TransportEndpoint } from '../transport/endpoint.js';
import { Jobs } from '../jobs/jobs.js';
import { pathOf } from '../transport/paths.js';
import { answerSockjsInfo } from '../transport/sockjs-info.js';
import type { CompressionOptions } from '../transport/frames.js';
import type { OutputBudget } from '../transport/output-budget.js';
import type { InputBudget } from '../transport/input-budget.js';
import type { DdpSocket } from '../transport/socket.js';
import type { DDPVersion } from '../ddp/messages.js';
import type { ConnectionHandle } from './connection-handle.js';
import { HttpRoutes, LISTEN_BACKLOG, type HealthReport } from './http.js';
import { checkServerOptionNames } from './option-names.js';
import { apm, type SessionFigures } from '../metrics/apm.js';
import type { PublicationStrategy } from './merge-box.js';
import { runDispatchHooks, type DispatchEvent, type DispatchHook } from './dispatch-hooks.js';
import type { MethodHandler } from './method-invocation.js';
import { Session, type SessionServer, type SessionSettings } from './session.js';
import { sessionMetrics } from './server-metrics.js';
import { limitSilentConnections } from './silent-connections.js';
import { containUpgradeErrors } from './upgrade-errors.js';
import type { PublishHandler } from './subscription.js';

export interface ServerOptions {
  /** Heartbeat ping interval in ms (Meteor: 15000); 0 turns heartbeats off. */
  heartbeatInterval?: number;
  /** How long to wait for any message after a ping, in ms (Meteor: 15000). */
  heartbeatTimeout?: number;
  /** How long a new socket may take to send `connect`, in ms (Meteor: 45000). */
  handshakeTimeout?: number;
  /** permessage-deflate policy, or false to not offer compression at all. */
  compression?: Partial<CompressionOptions> | false;
  /**
   * Largest DDP message accepted, in bytes (default 1 MiB). On a raw WebSocket a
   * larger one closes the connection (1009) as soon as it passes the limit; in
   * SockJS frames (up to twice the limit) it gets an `error` and is dropped.
   */
  maxMessageSize?: number;
  /** Outgoing bytes a client may leave unread before it is dropped (default 64 MiB). */
  maxBufferedBytes?: number;
  /**
   * Unsent output over every connection (default 256 MiB, or a quarter of the
   * heap limit when that is less): past it the clients holding the most are
   * held back, then dropped.
   */
  maxTotalBufferedBytes?: number;
  /** Subscriptions one connection may hold (default 1000); more get `nosub` with an error. */
  maxSubscriptionsPerConnection?: number;
  /** Subscriptions over every connection (default: one per 8 KiB of the heap limit), half at most from one client address; more get `nosub` with an error. */
  maxTotalSubscriptions?: number;
  /** Messages one connection may have waiting to run (default 10000); past it the client gets an error and is dropped. */
  maxQueuedMessages?: number;
  /**
   * Session resumption (Meteor 3.5): how long, in ms, a session whose client
   * went away without closing the connection waits for it to come back
   * (default 15000; 0 turns resumption off).
   */
  resumeGracePeriod?: number;
  /** Messages a session may hold for an absent client (default 1000); past it, or past maxBufferedBytes, the session ends. */
  resumeMaxMessages?: number;
  /**
   * Characters of the last messages a session keeps while its client is connected (default 4096), so that
   * a client whose socket dropped them can still resume. Kept messages outlive V8's young generation:
   * 16 KiB cost S1 12 % more CPU per message than 4 KiB.
   */
  resumeTailBytes?: number;
  /** Sessions waiting for their client at once (default 10000); past it the longest waiting ends. */
  resumeMaxSessions?: number;
  /** Connections from one client address (default 1000; 0 for no limit); more get an error and are closed. */
  maxConnectionsPerAddress?: number;
  /** Web pages allowed to connect, by origin, or `*` for any (default PERSEID_ALLOWED_ORIGINS, else none besides the server's own host and loopback). */
  allowedOrigins?: AllowedOrigins;
  /** Proxies in front of the server (default HTTP_FORWARDED_COUNT, else 0). */
  httpForwardedCount?: number;
  /**
   * Token the operational endpoints (`/perseid/stats`, `/metrics`, the dashboard,
   * `/perseid/apm`, advice, capacity) require as `Authorization: Bearer ...` from
   * everyone (default PERSEID_ADMIN_TOKEN); without one they answer loopback only.
   */
  adminToken?: string;
  /** False when a separate server answers the operational endpoints (`perseid start --admin-port`; see adminRoutes). */
  adminEndpoints?: boolean;
  /** Content-Security-Policy of static files (default DEFAULT_CONTENT_SECURITY_POLICY); false for none. */
  contentSecurityPolicy?: string | false;
  /** Directory of static files served over HTTP. */
  publicDir?: string;
  /**
   * The version of the app clients run (`perseid dev` sets a new one on every
   * restart); published to clients that subscribe to `perseid_autoupdate`, which
   * reload or resubscribe when it changes (Meteor's hot code push).
   */
  clientVersion?: string;
  /**
   * What this process does: `all` (default) serves clients and may run jobs,
   * `web` serves clients and never runs jobs, `jobs` runs jobs and serves no
   * DDP client (its DDP paths answer 503; /health and /perseid/stats stay).
   */
  role?: ServerRole;
  logger?: Logger;
}

export type ServerRole = 'web' | 'jobs' | 'all';
export const SERVER_ROLES: readonly ServerRole[] = ['web', 'jobs', 'all'];

const DRAINING = defineCloseReason('SERVER_DRAINING', 1001, 'Server draining');
const SHUTTING_DOWN = defineCloseReason('SERVER_SHUTTING_DOWN', 1001, 'Server shutting down');
/** WebSocket's "service restart": the server is back in a moment (`perseid dev`), so clients may retry at once. */
const RESTARTING = defineCloseReason('SERVER_RESTARTING', 1012, 'Server restarting');

const DEFAULT_MAX_BUFFERED_BYTES = 64 * 1024 * 1024;

export const DEFAULT_COMPRESSION: CompressionOptions = { threshold: 1024, level: 1, memLevel: 8 };

/** The default server-wide budget of unsent output: 256 MiB, or a quarter of the heap limit when that is less. */
export function defaultTotalBufferedBytes(): number {
  return Math.min(256 * 1024 * 1024, Math.floor(getHeapStatistics().heap_size_limit / 4));
}

export class PerseidServer implements SessionServer {
  readonly httpServer: HttpServer;
  readonly settings: SessionSettings;
  readonly log: Logger;
  readonly role: ServerRole;
  /** Scheduled and queued jobs: defined in every process, run where the role includes jobs (see `jobs.start`). */
  readonly jobs = new Jobs();
  private readonly methodHandlers = new Map<string, MethodHandler>();
  private readonly publications = new Map<string, PublishHandler>();
  private readonly universal: PublishHandler[] = [];
  private readonly strategies = new Map<string, PublicationStrategy>();
  private readonly connectionCallbacks: Array<(connection: ConnectionHandle) => void> = [];
  private readonly dispatchHooks: DispatchHook[] = [];
  private readonly closeHooks: Array<() => unknown> = [];
  private readonly sessions = new Set<Session>();
  private readonly sessionsById = new Map<string, Session>();
  /** Sessions waiting for their client to come back, longest waiting first. */
  private readonly parked = new Set<Session>();
  private readonly resumeMaxSessions: number;
  /** Client sockets open now, with the address each counts against. */
  private readonly sockets = new Map<DdpSocket, string | undefined>();
  private readonly transport: TransportEndpoint;
  private routes: HttpRoutes;
  private readonly startedAt = Date.now();
  private draining = false;
  /** Wakes a drain waiting between two closes when the last connection has gone. */
  private lastGone: (() => void) | undefined;
  private readonly healthChecks = new Map<string, () => string | undefined>();
  private readonly door: FrontDoor;
  /** A cluster's balancer, when this server routes new clients: its view of every server goes into /metrics. */
  private router: ConnectionRouter | undefined;
  private readonly addressLimit: AddressLimit;
  readonly subscriptionBudget: SubscriptionBudget;
  private readonly waitingPerAddress: WaitingPerAddress<Session>;
  private readonly connectionRefusals: RefusalLog;
  readonly methodFailures: RefusalLog;
  private readonly proxyWarning: UntrustedProxyWarning;

  constructor(options: ServerOptions = {}) {
    checkServerOptionNames(options);
    this.log = options.logger ?? createLogger('server');
    this.role = options.role ?? 'all';
    if (!SERVER_ROLES.includes(this.role)) throw new Error(`role must be one of ${SERVER_ROLES.join(', ')} (got ${String(options.role)})`);
    this.door = new FrontDoor(this.log);
    const maxMessageSize = options.maxMessageSize ?? 1024 * 1024;
    const maxQueuedMessages = options.maxQueuedMessages ?? 10000;
    const forwardedCount = options.httpForwardedCount ?? forwardedCountFromEnv();
    this.settings = {
      heartbeatInterval: options.heartbeatInterval ?? 15000,
      heartbeatTimeout: options.heartbeatTimeout ?? 15000,
      handshakeTimeout: options.handshakeTimeout ?? 45000,
      inboundHighWater: Math.max(1, Math.min(1000, Math.floor(maxQueuedMessages / 4))),
      inboundHighWaterBytes: 4 * maxMessageSize,
      inboundLimit: maxQueuedMessages,
      inboundLimitBytes: 16 * maxMessageSize,
      maxMessageSize,
      maxSubscriptions: options.maxSubscriptionsPerConnection ?? 1000,
      writableWaitMs: 30000,
      forwardedCount,
      resumeGraceMs: options.resumeGracePeriod ?? 15000,
      resumeMaxMessages: options.resumeMaxMessages ?? 1000,
      resumeMaxBytes: options.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES,
      resumeTailBytes: options.resumeTailBytes ?? 4 * 1024,
    };
    this.resumeMaxSessions = options.resumeMaxSessions ?? 10000;
    this.subscriptionBudget = new SubscriptionBudget(options.maxTotalSubscriptions ?? defaultTotalSubscriptions(), this.log);
    this.addressLimit = new AddressLimit(options.maxConnectionsPerAddress ?? DEFAULT_CONNECTIONS_PER_ADDRESS);
    this.proxyWarning = new UntrustedProxyWarning(this.log, forwardedCount);
    this.connectionRefusals = new RefusalLog(this.log, 'refusing connections: too many from one address (raise --max-connections-per-address, or set HTTP_FORWARDED_COUNT behind a proxy)');
    // A database that is down fails every call: a line per call flooded the log during an outage.
    this.methodFailures = new RefusalLog(this.log, 'methods failing with a server error, logged at most once a minute (failed: how many since the last line, the one named among them)', 'failed');
    this.waitingPerAddress = new WaitingPerAddress(this.addressLimit.limit);
    const compression = options.compression === false ? false : { ...DEFAULT_COMPRESSION, ...options.compression };
    this.transport = new TransportEndpoint(
      {
        maxMessageSize,
        maxQueuedMessages,
        compression,
        maxBufferedBytes: options.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES,
        maxTotalBufferedBytes: options.maxTotalBufferedBytes ?? defaultTotalBufferedBytes(),
        allowedOrigins: options.allowedOrigins ?? parseAllowedOrigins(process.env.PERSEID_ALLOWED_ORIGINS ?? ''),
        forwardedCount,
        sockjsHeartbeatMs: 45000,
        sockjsDisconnectDelayMs: 60000,
      },
      (socket) => this.accept(socket),
      this.log.child('transport'),
    );
    this.routes = new HttpRoutes({
      publicDir: options.publicDir,
      health: () => this.health(),
      admin: { token: adminToken(options.adminToken ?? process.env.PERSEID_ADMIN_TOKEN), forwardedCount },
      contentSecurityPolicy: options.contentSecurityPolicy,
      peerOrigins: () => this.transport.peerOrigins(),
      apm: async () => {
        const snapshot = await apm.snapshot();
        if (this.router) {
          snapshot.server = this.router.id;
          snapshot.servers = this.router.serverSummaries();
        }
        return snapshot;
      },
      adminEndpoints: options.adminEndpoints !== false,
    });
    apm.start();
    apm.sessionsFrom(() => this.sessionFigures());
    const version = options.clientVersion;
    // Every server answers it (ready, with no document when no version is set), so a client can always subscribe.
    this.publish(AUTOUPDATE.publication, function () {
      if (version !== undefined) this.added(AUTOUPDATE.collection, AUTOUPDATE.id, { version });
      this.ready();
    });
    this.httpServer = createHttpServer((req, res) => {
      res.setHeader('server', 'perseid');
      if (this.role === 'jobs' && isDdpPath(pathOf(req.url))) refuseClients(res);
      else if (this.door.routing && pathOf(req.url) === '/sockjs/info') answerSockjsInfo(req, res, this.door.sockjsBaseUrl(), this.transport.originAllowed(req));
      else if (!this.transport.handleRequest(req, res)) this.routes.handle(req, res);
    });
    this.httpServer.on('upgrade', (req, socket: Duplex, head: Buffer) => {
      if (this.role === 'jobs') socket.end(`HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n${JOBS_ONLY}\n`);
      else this.door.upgrade(req, socket, head, () => this.serveUpgrade(req, socket, head));
    });
    limitSilentConnections(this.httpServer, { perAddress: this.addressLimit.limit, forwardedCount, upgrades: true });
    containUpgradeErrors(this.httpServer);
    this.httpServer.on('clientError', (_error, socket) => {
      if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      else socket.destroy();
    });
  }

  /** Lets `router` (a cluster's balancer) send new clients to other servers. */
  routeConnections(router: ConnectionRouter): this {
    this.door.route(router);
    this.router = router;
    this.transport.peerOrigins = () => this.door.peerOrigins();
    return this;
  }

  /** The origins of the other servers of a cluster, when a workers' primary (not this process) knows them. */
  trustPeerOrigins(origins: readonly string[]): this {
    this.transport.peerOrigins = () => origins;
    return this;
  }

  /**
   * Says that SockJS's HTTP requests reach this server through a workers'
   * primary (which adds itself to X-Forwarded-For), so clients are told apart
   * by their own address, not the primary's.
   */
  servedThroughPrimary(): this {
    this.transport.sockjsOwnProxies = 1;
    this.proxyWarning.leaveToOther();
    return this;
  }

  /** Runs `hook` first when the server drains (leaving a cluster's registry, say). */
  onDrain(hook: () => Promise<void>): this {
    this.door.onDrain(hook);
    return this;
  }

  /** Defines methods, Meteor style: `server.methods({ name(...params) { ... } })`. */
  methods(definitions: Record<string, MethodHandler>): this {
    for (const [name, handler] of Object.entries(definitions)) {
      if (typeof handler !== 'function') throw new TypeError(`Method '${name}' must be a function`);
      if (this.methodHandlers.has(name)) throw new Error(`A method named '${name}' is already defined`);
      this.methodHandlers.set(name, handler);
    }
    return this;
  }

  /** Defines a publication; `null` as the name makes it universal (every connection gets it). */
  publish(name: string | null, handler: PublishHandler): this {
    if (typeof handler !== 'function') throw new TypeError('A publish handler must be a function');
    if (name === null) {
      this.universal.push(handler);
      return this;
    }
    if (this.publications.has(name)) throw new Error(`A publication named '${name}' is already defined`);
    this.publications.set(name, handler);
    return this;
  }

  /** Serves the files of `dir` over HTTP (an app's page, scripts, images). */
  serveStatic(dir: string): this {
    // A relative `dir` is from the working directory, not the app file: started from elsewhere, every file would 404 without a word.
    const full = resolve(dir);
    if (!existsSync(full)) {
      this.log.warn("serveStatic: the directory does not exist, so its files will not be found; to serve the app's own, give a path from its file: fileURLToPath(new URL('./public/', import.meta.url))", { dir: full });
    } else if (!statSync(full).isDirectory()) {
      this.log.warn('serveStatic: this is a file, not a directory, so nothing will be served from it; give the directory that holds the files', { dir: full });
    }
    this.routes = this.routes.withPublicDir(dir);
    return this;
  }

  get publicDir(): string | undefined {
    return this.routes.publicDir;
  }

  /** How the merge box treats one collection's documents (see PublicationStrategy). */
  setPublicationStrategy(collection: string, strategy: PublicationStrategy): this {
    this.strategies.set(collection, strategy);
    return this;
  }

  onConnection(callback: (connection: ConnectionHandle) => void): this {
    this.connectionCallbacks.push(callback);
    return this;
  }

  /**
   * Runs `hook` before every method call and subscription (once its handler is
   * found); a hook that throws refuses the call with that error (see dispatch-hooks.ts).
   */
  beforeDispatch(hook: DispatchHook): this {
    if (typeof hook !== 'function') throw new TypeError('A dispatch hook must be a function');
    this.dispatchHooks.push(hook);
    return this;
  }

  /** Runs `hook` once the server has closed (to release what a plugin opened: timers, clients). */
  onClose(hook: () => unknown): this {
    this.closeHooks.push(hook);
    return this;
  }

  /** Starts listening; resolves with the address. */
  listen(port = 3000, host = '127.0.0.1'): Promise<{ url: string; port: number; host: string }> {
    return new Promise((resolve, reject) => {
      const onError = (error: Error) => reject(error);
      this.httpServer.once('error', onError);
      this.httpServer.listen({ port, host, backlog: LISTEN_BACKLOG }, () => {
        this.httpServer.off('error', onError);
        const address = this.httpServer.address() as AddressInfo;
        const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;
        resolve({ url: `http://${shown}:${address.port}`, port: address.port, host: address.address });
      });
    });
  }

  /**
   * Graceful shutdown: stop taking connections (/health answers 503 so a
   * balancer stops sending), then close the open ones spread over `windowMs`,
   * so their clients reconnect elsewhere without arriving all at once.
   */
  async drain(windowMs: number): Promise<void> {
    // Still listening: /health answers 503 and new DDP connections are turned away (see accept).
    this.draining = true;
    await this.door.drainFirst();
    const sockets = [...this.sockets.keys()];
    const owners = new Map<DdpSocket, Session>();
    for (const session of this.sessions) owners.set(session.socket, session);
    this.log.info('draining', { connections: sockets.length, windowMs });
    const step = sockets.length > 0 ? windowMs / sockets.length : 0;
    for (const socket of sockets) {
      if (this.sockets.size === 0) break; // the last client has gone: nothing left to wait for
      if (!this.sockets.has(socket)) continue;
      const session = owners.get(socket);
      if (session) session.closeWhenIdle(DRAINING.code, DRAINING.reason);
      else socket.close(DRAINING.code, DRAINING.reason);
      if (step > 0) await this.untilLastGone(step);
    }
    // Connections whose methods are still running close as those answer, given at most one more window.
    if (this.sockets.size > 0) {
      this.log.info('draining: waiting for methods in flight', { connections: this.sockets.size });
      await this.untilLastGone(windowMs);
    }
    await this.close();
  }

  /** Waits `ms`, or less if the last connection goes first. */
  private async untilLastGone(ms: number): Promise<void> {
    if (this.sockets.size === 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.lastGone = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.lastGone = undefined;
  }

  /**
   * Stops accepting connections and closes every open one; `restarting` tells
   * their clients the server is back in a moment (Perseid's client then retries
   * at once instead of backing off).
   */
  async close(options: { restarting?: boolean } = {}): Promise<void> {
    this.transport.close();
    for (const session of [...this.parked]) session.shutDown();
    const { code, reason } = options.restarting ? RESTARTING : SHUTTING_DOWN;
    for (const socket of this.sockets.keys()) socket.close(code, reason);
    await new Promise<void>((resolve) => {
      this.httpServer.close(() => resolve());
      this.httpServer.closeAllConnections();
    });
    for (const socket of this.sockets.keys()) socket.terminate();
    for (const hook of this.closeHooks.splice(0)) {
      try {
        await hook();
      } catch (error) {
        this.log.error('an onClose hook failed', { error });
      }
    }
  }

  get sessionCount(): number {
    // Sessions whose client is connected; those waiting for theirs to come back are awaitingResumeCount.
    return this.sessions.size - this.parked.size;
  }

  /** Client connections open now, counted from the upgrade (before their DDP handshake). */
  get connectionCount(): number {
    return this.sockets.size;
  }

  /** Adds a check to /health: it answers 503 `failing` with the reason while `check` returns one (e.g. a database that cannot write). */
  healthCheck(name: string, check: () => string | undefined): this {
    this.healthChecks.set(name, check);
    return this;
  }

  health(): HealthReport {
    const report = { role: this.role, sessions: this.sessionCount, uptimeSeconds: Math.round((Date.now() - this.startedAt) / 1000) };
    if (this.draining) return { status: 'draining', ...report };
    const problems = [...this.healthChecks].flatMap(([name, check]) => {
      const problem = check();
      return problem ? [`${name}: ${problem}`] : [];
    });
    return problems.length ? { status: 'failing', reason: problems.join('; '), ...report } : { status: 'ok', ...report };
  }

  // ---- SessionServer ----

  method(name: string): MethodHandler | undefined {
    return this.methodHandlers.get(name);
  }

  publication(name: string): PublishHandler | undefined {
    return this.publications.get(name);
  }

  universalPublications(): readonly PublishHandler[] {
    return this.universal;
  }

  dispatching(event: DispatchEvent): Promise<void> | undefined {
    return runDispatchHooks(this.dispatchHooks, event);
  }

  strategyOf(collection: string): PublicationStrategy {
    return this.strategies.get(collection) ?? 'SERVER_MERGE';
  }

  get outputBudget(): OutputBudget {
    return this.transport.budget;
  }

  get inputBudget(): InputBudget {
    return this.transport.inputBudget;
  }

  /** Sessions whose client went away, waiting for it to resume them. */
  get awaitingResumeCount(): number {
    return this.parked.size;
  }

  /** Answers an operational endpoint (for an `--admin-port` server); false for any other path. */
  adminRequest(req: IncomingMessage, res: ServerResponse): boolean {
    return this.routes.handleAdmin(req, res);
  }

  sessionOpened(session: Session): void {
    this.sessions.add(session);
    this.sessionsById.set(session.id, session);
    sessionMetrics.sessions.set(this.sessions.size);
    sessionMetrics.sessionsOpened.inc();
    apm.sessionOpened(session.socket.transport);
    this.log.debug('session opened', { session: session.id, transport: session.socket.transport, version: session.version });
    for (const callback of this.connectionCallbacks) {
      try {
        callback(session.connection);
      } catch (error) {
        this.log.error('onConnection callback failed', { error });
      }
    }
  }

  /** Sessions by transport and distinct users, for the APM (read every few seconds, never per message). */
  private sessionFigures(): SessionFigures {
    const byTransport: Record<string, number> = {};
    const users = new Set<string>();
    for (const session of this.sessions) {
      const transport = session.socket.transport;
      byTransport[transport] = (byTransport[transport] ?? 0) + 1;
      if (session.userId !== null) users.add(session.userId);
    }
    return { sessions: this.sessions.size, users: users.size, byTransport };
  }

  sessionClosed(session: Session): void {
    this.sessions.delete(session);
    this.sessionsById.delete(session.id);
    this.sessionUnparked(session);
    sessionMetrics.sessions.set(this.sessions.size);
    this.log.debug('session closed', { session: session.id });
  }

  sessionParked(session: Session): void {
    this.parked.add(session);
    const ousted = this.waitingPerAddress.add(session.connection.clientAddress, session);
    if (ousted) {
      this.log.debug('ending a session waiting for its client: too many are waiting from its address', { session: ousted.id, limit: this.waitingPerAddress.limit });
      ousted.shutDown();
    }
    if (this.parked.size <= this.resumeMaxSessions) return;
    const [longest] = this.parked;
    this.log.debug('ending a session waiting for its client: too many are waiting', { session: longest?.id, limit: this.resumeMaxSessions });
    longest?.shutDown();
  }

  sessionUnparked(session: Session): void {
    this.parked.delete(session);
    this.waitingPerAddress.delete(session.connection.clientAddress, session);
  }

  socketClosed(socket: DdpSocket): void {
    if (!this.sockets.has(socket)) return;
    const address = this.sockets.get(socket);
    this.sockets.delete(socket);
    this.addressLimit.release(address);
    if (this.sockets.size === 0) this.lastGone?.();
  }

  resume(sessionId: string, receivedCount: number, socket: DdpSocket, version: DDPVersion): boolean {
    const session = this.sessionsById.get(sessionId);
    return session !== undefined && session.resume(socket, receivedCount, version);
  }

  private serveUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    if (!this.transport.handleUpgrade(req, socket, head)) socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n');
  }

  private accept(socket: DdpSocket): void {
    if (this.draining) {
      // A connection that slipped in while draining (a keep-alive SockJS request): send it elsewhere.
      socket.close(DRAINING.code, DRAINING.reason);
      return;
    }
    const address = clientAddress(socket.remoteAddress, socket.headers, this.settings.forwardedCount + socket.ownProxies);
    this.proxyWarning.check(socket.remoteAddress, socket.headers, socket.ownProxies);
    if (!this.addressLimit.take(address)) {
      sessionMetrics.connectionsRefused.inc();
      this.connectionRefusals.refusedOne({ address, limit: this.addressLimit.limit });
      socket.send(encodeMessage({ msg: 'error', reason: ProtocolErrors.tooManyConnections({ limit: this.addressLimit.limit }) }));
      socket.close();
      return;
    }
    this.sockets.set(socket, address);
    // It may turn out to resume another session, which then owns the socket (see Session.resume).
    new Session(socket, this);
  }
}

const JOBS_ONLY = 'This Perseid process runs jobs only (role jobs) and serves no DDP clients: connect to a web process.';

/** `/websocket` and `/sockjs/...`: where a jobs-only process turns clients away. */
function isDdpPath(path: string): boolean {
  return path === '/websocket' || path === '/websocket/' || path === '/sockjs' || path.startsWith('/sockjs/');
}

function refuseClients(res: ServerResponse): void {
  res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
  res.end(`${JOBS_ONLY}\n`);
}

export function createServer(options: ServerOptions = {}): PerseidServer {
  return new PerseidServer(options);
}
