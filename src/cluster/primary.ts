/**
 * `perseid start --workers n`: the primary owns the port and runs no app code.
 * WebSocket upgrades go to the least loaded worker as the raw socket (the
 * primary never touches their traffic); SockJS polling requests are proxied to
 * the worker that has their session; static files, /health and /sockjs/info are
 * answered here. With MongoDB, the primary follows the database once and
 * forwards each change to the workers whose live queries watch its collection.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../log.js';
import { apm, type ApmSnapshot } from '../metrics/apm.js';
import { mergeSnapshots } from '../metrics/dashboard-view.js';
import { residentBytes } from '../metrics/memory-usage.js';
import { metrics } from '../metrics/registry.js';
import type { ChangeSource } from '../data/change-source.js';
import { HttpRoutes, LISTEN_BACKLOG, type HealthReport } from '../server/http.js';
import { originAllowed, type AllowedOrigins } from '../transport/origins.js';
import { isWebSocketPath, opensSockjsSession, pathOf, sockjsSessionOf } from '../transport/paths.js';
import { answerSockjsInfo } from '../transport/sockjs-info.js';
import { ChangeForwarder } from './change-forwarder.js';
import type { ConnectionRouter } from '../server/connection-router.js';
import { serverSummary, type LoadFigures } from './load-monitor.js';
import { proxyRequest } from '../transport/proxy.js';
import { FrontDoor } from '../server/front-door.js';
import { limitSilentConnections } from '../server/silent-connections.js';
import { containUpgradeErrors } from '../server/upgrade-errors.js';
import { UntrustedProxyWarning } from '../server/proxy-warning.js';
import { upgradeOwnProxies } from '../transport/passed-on.js';
import { WorkerPool, type WorkerHandle } from './worker-pool.js';
import { mergeWorkerStats } from './worker-stats.js';

export interface PrimaryOptions {
  workers: number;
  /** The module and arguments a worker runs (the CLI's `start`, with PERSEID_WORKER_ID set). */
  workerModule: string;
  workerArgs: string[];
  workerEnv: NodeJS.ProcessEnv;
  /** The machine's change feed, when the database has one to share. */
  feed?: { changes: ChangeSource; poke(collection: string): void };
  /** The role its workers run with (`web` or `all`), reported by /health. */
  role?: 'web' | 'all';
  /** Pages allowed to connect (the workers check their own connections; the primary answers `/sockjs/info`). */
  allowedOrigins: AllowedOrigins;
  forwardedCount: number;
  /** Connections one client address may hold (--max-connections-per-address; 0: no limit), here those that have not sent their request yet. */
  maxConnectionsPerAddress?: number;
  /** Content-Security-Policy of the static files the primary serves. */
  contentSecurityPolicy?: string | false;
  /** False when `--admin-port` serves the operational endpoints (see adminRequest). */
  adminEndpoints?: boolean;
  log: Logger;
}


export class Primary {
  readonly httpServer: Server;
  private readonly pool: WorkerPool;
  private readonly forwarder: ChangeForwarder | undefined;
  private routes: HttpRoutes;
  private draining = false;
  private readonly door: FrontDoor;
  private router: ConnectionRouter | undefined;
  /** Said here, where every connection to the machine arrives; the workers leave it to the primary. */
  private readonly proxyWarning: UntrustedProxyWarning;

  constructor(private readonly options: PrimaryOptions) {
    this.door = new FrontDoor(options.log);
    this.proxyWarning = new UntrustedProxyWarning(options.log, options.forwardedCount);
    // Samples the primary's own process (CPU, memory, event loop) for its /metrics.
    apm.start();
    this.forwarder = options.feed ? new ChangeForwarder(options.feed.changes) : undefined;
    const links = new Map<WorkerHandle, { send: WorkerHandle['send'] }>();
    const link = (worker: WorkerHandle) => {
      let l = links.get(worker);
      if (!l) links.set(worker, (l = { send: (m) => worker.send(m) }));
      return l;
    };
    this.pool = new WorkerPool({
      count: options.workers,
      modulePath: options.workerModule,
      args: options.workerArgs,
      env: options.workerEnv,
      log: options.log,
      onMessage: (worker, message) => {
        if (message.type === 'watch') this.forwarder?.setWatched(link(worker), message.collections);
        else if (message.type === 'poke') options.feed?.poke(message.collection);
        else if (message.type === 'ready' && message.publicDir && !this.routes.hasPublicDir) this.routes = this.routes.withPublicDir(message.publicDir);
      },
      onExit: (worker) => {
        const l = links.get(worker);
        if (l) this.forwarder?.removeWorker(l);
        links.delete(worker);
      },
    });
    this.routes = new HttpRoutes({
      health: () => this.health(),
      contentSecurityPolicy: options.contentSecurityPolicy,
      peerOrigins: () => this.door.peerOrigins(),
      apm: () => this.workersApm(),
      stats: () => this.workersStats(),
      adminEndpoints: options.adminEndpoints !== false,
    });
    metrics.section('workers', () => {
      const pinned = this.pool.pinnedSessions();
      return this.pool.ready.map((w) => ({ id: w.id, pid: w.process.pid, ...w.load, sockjsSessions: pinned.get(w.id) ?? 0 }));
    });
    this.httpServer = createServer((req, res) => this.request(req, res));
    limitSilentConnections(this.httpServer, { perAddress: options.maxConnectionsPerAddress, forwardedCount: options.forwardedCount, upgrades: true });
    containUpgradeErrors(this.httpServer);
    this.httpServer.on('upgrade', (req, socket: Duplex, head: Buffer) => this.door.upgrade(req, socket, head, () => this.handOff(req, socket as Socket, head)));
  }

  /** Lets `router` (a cluster's balancer) send new clients to other servers; the workers learn its servers' origins. */
  routeConnections(router: ConnectionRouter): this {
    this.door.route(router);
    this.router = router;
    // Every second, so a worker that starts (or restarts) later learns them too.
    const tell = () => this.pool.broadcast({ type: 'origins', origins: [...this.door.peerOrigins()] });
    tell();
    setInterval(tell, 1000).unref();
    return this;
  }

  /** Runs `hook` first when the primary drains (leaving a cluster's registry, say). */
  onDrain(hook: () => Promise<void>): this {
    this.door.onDrain(hook);
    return this;
  }

  /** The machine's load: sessions, memory and method calls per second of all workers, their mean CPU, worst event-loop delay and worst p95 method time. */
  load(): LoadFigures {
    const ready = this.pool.ready;
    return {
      sessions: ready.reduce((n, w) => n + w.load.sessions, 0),
      cpuPercent: ready.length ? Math.round(ready.reduce((n, w) => n + w.load.cpuPercent, 0) / ready.length) : 0,
      lagMs: Math.max(0, ...ready.map((w) => w.load.lagMs)),
      memoryMb: ready.reduce((n, w) => n + w.load.memoryMb, Math.round(residentBytes() / 1048576)),
      methodP95Ms: Math.max(0, ...ready.map((w) => w.load.methodP95Ms)),
      methodsPerSec: Math.round(ready.reduce((n, w) => n + (w.load.methodsPerSec ?? 0), 0) * 10) / 10,
    };
  }

  /** Sessions open on the workers, as they last reported. */
  get connectionCount(): number {
    return this.load().sessions;
  }

  async listen(port: number, host: string): Promise<{ url: string; port: number; host: string }> {
    await this.pool.start();
    await new Promise<void>((resolve, reject) => {
      this.httpServer.once('error', reject);
      this.httpServer.listen({ port, host, backlog: LISTEN_BACKLOG }, () => resolve());
    });
    const address = this.httpServer.address() as AddressInfo;
    return { url: `http://${address.address}:${address.port}`, port: address.port, host: address.address };
  }

  health(): HealthReport & { workers: number } {
    return {
      status: this.draining ? 'draining' : 'ok',
      role: this.options.role ?? 'all',
      sessions: this.load().sessions,
      uptimeSeconds: Math.round(process.uptime()),
      workers: this.pool.ready.length,
    };
  }

  /** Stops taking connections and has the workers close theirs gradually over `windowMs`. */
  async drain(windowMs: number): Promise<void> {
    // Still listening while the workers drain: /health answers 503, new connections are refused.
    this.draining = true;
    await this.door.drainFirst();
    this.pool.broadcast({ type: 'drain', windowMs });
    // A worker's drain may take a second window for methods still running (PerseidServer.drain).
    await this.pool.stop(2 * windowMs + 5000);
    this.httpServer.close();
    this.httpServer.closeAllConnections();
    metrics.removeSection('workers');
  }

  async close(): Promise<void> {
    this.draining = true;
    this.httpServer.close();
    this.httpServer.closeAllConnections();
    await this.pool.stop();
    metrics.removeSection('workers');
  }

  /** What each ready worker answers at `path` of its private loopback port (a worker that does not is left out, and logged). */
  private async fromWorkers<T>(path: string, what: string): Promise<Array<{ id: number; figures: T }>> {
    const token = process.env.PERSEID_ADMIN_TOKEN;
    const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
    // Behind proxies (HTTP_FORWARDED_COUNT) a worker takes its client from X-Forwarded-For: say it is this machine.
    if (this.options.forwardedCount > 0) headers['x-forwarded-for'] = Array(this.options.forwardedCount).fill('127.0.0.1').join(', ');
    const answers = await Promise.all(
      this.pool.ready.map(async (worker) => {
        try {
          const res = await fetch(`http://127.0.0.1:${worker.httpPort}${path}`, { headers, signal: AbortSignal.timeout(5000) });
          if (!res.ok) throw new Error(`answered ${res.status}`);
          return { id: worker.id, figures: (await res.json()) as T };
        } catch (error) {
          this.options.log.warn(`could not read a worker's ${what}`, { worker: worker.id, error: (error as Error).message });
          return undefined;
        }
      }),
    );
    return answers.filter((a) => a !== undefined);
  }

  /** The APM figures of every ready worker, so one scrape of the primary covers the machine. */
  private async workersApm(): Promise<ApmSnapshot> {
    const merged = mergeSnapshots((await this.fromWorkers<ApmSnapshot>('/perseid/apm', 'APM figures')).map((a) => a.figures));
    merged.primary = apm.ownFigures();
    // Its workers, then (in a cluster) every server of it as the cluster's registry has them.
    merged.servers = [...this.pool.ready.map((w) => serverSummary(`worker-${w.id}`, w.load)), ...(this.router?.serverSummaries() ?? [])];
    if (this.router) merged.server = this.router.id;
    return merged;
  }

  /** The workers' stats as one (worker-stats.ts), the primary's sections (its workers, the cluster), and its own counters (its change feed's). */
  private async workersStats(): Promise<Record<string, unknown>> {
    const workers = await this.fromWorkers<Record<string, unknown>>('/perseid/stats', 'stats');
    return {
      ...mergeWorkerStats(workers.map((w) => ({ id: w.id, stats: w.figures }))),
      ...metrics.describeSections(),
      primary: { pid: process.pid, ...metrics.snapshot() },
    };
  }

  /** Answers an operational endpoint on the `--admin-port` server; false for any other path. */
  adminRequest(req: IncomingMessage, res: ServerResponse): boolean {
    return this.routes.handleAdmin(req, res);
  }

  private handOff(req: IncomingMessage, socket: Socket, head: Buffer): void {
    const worker = isWebSocketPath(pathOf(req.url)) && !this.draining ? this.pool.choose() : undefined;
    if (!worker) {
      socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\r\n');
      return;
    }
    this.proxyWarning.check(req.socket.remoteAddress, req.headers, upgradeOwnProxies(req));
    this.pool.handoff(worker, req, socket, head);
  }

  private request(req: IncomingMessage, res: ServerResponse): void {
    const path = pathOf(req.url);
    if (path === '/sockjs/info') {
      answerSockjsInfo(req, res, this.door.sockjsBaseUrl(), originAllowed(req, this.options.allowedOrigins, this.options.forwardedCount, this.door.peerOrigins()));
      return;
    }
    if (path.startsWith('/sockjs/')) {
      this.proxyWarning.check(req.socket.remoteAddress, req.headers, 0);
      const session = sockjsSessionOf(path);
      const worker = session ? this.pool.forSession(session, opensSockjsSession(path)) : this.pool.choose();
      if (!worker?.httpPort) {
        res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8' });
        res.end('No worker is ready\n');
        return;
      }
      proxyRequest(req, res, { host: '127.0.0.1', port: worker.httpPort });
      return;
    }
    this.routes.handle(req, res);
  }
}
