/**
 * The primary's workers: forked copies of the app, replaced when one dies,
 * chosen by load for each new connection; SockJS polling sessions stay with the
 * worker that has them.
 */
import { fork, type ChildProcess } from 'node:child_process';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { STOP_GRACE_MS } from '../jobs/jobs.js';
import { upgradeOwnProxies } from '../transport/passed-on.js';
import type { Logger } from '../log.js';
import type { PrimaryToWorker, WorkerToPrimary } from './ipc-messages.js';
import { loadScore, type LoadFigures } from './load-monitor.js';

export interface WorkerHandle {
  readonly id: number;
  readonly process: ChildProcess;
  httpPort: number | undefined;
  publicDir: string | undefined;
  load: LoadFigures;
  /** Connections handed to it since its last load report (so a burst does not all land on one worker). */
  pending: number;
  send(message: PrimaryToWorker, socket?: Socket): void;
}

export interface WorkerPoolOptions {
  count: number;
  /** Module the workers run, and its arguments. */
  modulePath: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  onMessage(worker: WorkerHandle, message: WorkerToPrimary): void;
  onExit(worker: WorkerHandle): void;
  log: Logger;
}

/** A SockJS polling session goes quiet between requests; after this long it is gone (sockjs: 60 s). */
const STICKY_TTL_MS = 120000;

export class WorkerPool {
  private readonly workers = new Map<number, WorkerHandle>();
  private readonly sticky = new Map<string, { worker: WorkerHandle; seen: number }>();
  private readonly restarts: number[] = [];
  private nextId = 1;
  private stopping = false;
  private readonly sweep: NodeJS.Timeout;

  constructor(private readonly options: WorkerPoolOptions) {
    this.sweep = setInterval(() => {
      const cutoff = Date.now() - STICKY_TTL_MS;
      for (const [session, entry] of this.sticky) if (entry.seen < cutoff) this.sticky.delete(session);
    }, 30000);
    this.sweep.unref();
  }

  /** Forks every worker; resolves when all have said they are ready. */
  async start(): Promise<void> {
    await Promise.all(Array.from({ length: this.options.count }, () => this.spawn()));
  }

  get ready(): WorkerHandle[] {
    return [...this.workers.values()].filter((w) => w.httpPort !== undefined);
  }

  /** The least loaded ready worker. */
  choose(): WorkerHandle | undefined {
    let best: WorkerHandle | undefined;
    let bestScore = Infinity;
    for (const worker of this.ready) {
      const score = loadScore(worker.load) + worker.pending;
      if (score < bestScore) [best, bestScore] = [worker, score];
    }
    if (best) best.pending++;
    return best;
  }

  /**
   * The worker of a SockJS session, chosen by load on its first request. Only a request that can open the session
   * (`opens`) pins it there: a post to a session no worker has is answered 404 by any, and pinning each such id
   * let a client grow this map by some 1.7 KB a request (100,000 xhr_send to made-up ids: 170 MB) for two minutes.
   */
  forSession(session: string, opens: boolean): WorkerHandle | undefined {
    const entry = this.sticky.get(session);
    if (entry && this.workers.has(entry.worker.id)) {
      entry.seen = Date.now();
      return entry.worker;
    }
    const worker = this.choose();
    if (worker && opens) this.sticky.set(session, { worker, seen: Date.now() });
    return worker;
  }

  /** SockJS sessions pinned to each worker, by worker id. */
  pinnedSessions(): Map<number, number> {
    const counts = new Map<number, number>();
    for (const { worker } of this.sticky.values()) counts.set(worker.id, (counts.get(worker.id) ?? 0) + 1);
    return counts;
  }

  /** Gives a WebSocket upgrade to `worker`: the raw socket and the bytes already read travel over IPC. */
  handoff(worker: WorkerHandle, req: IncomingMessage, socket: Socket, head: Buffer): void {
    // This process keeps reading its copy of the socket until the worker acknowledges it, and would
    // swallow the client's first frame sent meanwhile (nodejs/node#8353); Node has no public way to
    // stop native reads, hence the private handle.
    (socket as unknown as { _handle?: { readStop?(): number } })._handle?.readStop?.();
    const passedOn = upgradeOwnProxies(req) > 0;
    worker.send({ type: 'upgrade', method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers, head: head.toString('base64'), passedOn }, socket);
  }

  broadcast(message: PrimaryToWorker): void {
    for (const worker of this.workers.values()) worker.send(message);
  }

  /** Stops every worker: lets them exit by themselves for `graceMs` (a drain), then tells them to close, then SIGKILL. */
  async stop(graceMs = 0): Promise<void> {
    this.stopping = true;
    clearInterval(this.sweep);
    await Promise.all(
      [...this.workers.values()].map(
        (w) =>
          new Promise<void>((resolve) => {
            if (w.process.exitCode !== null || w.process.signalCode !== null) return resolve();
            w.process.once('exit', () => resolve());
            const term = setTimeout(() => w.send({ type: 'close' }), graceMs);
            // Told to close, a worker still gives its running jobs their grace, then puts their runs back in the queue.
            const kill = setTimeout(() => w.process.kill('SIGKILL'), graceMs + STOP_GRACE_MS + 5000);
            w.process.once('exit', () => {
              clearTimeout(term);
              clearTimeout(kill);
            });
          }),
      ),
    );
  }

  private spawn(): Promise<void> {
    const id = this.nextId++;
    const child = fork(this.options.modulePath, this.options.args, { env: { ...this.options.env, PERSEID_WORKER_ID: String(id) }, serialization: 'json' });
    const worker: WorkerHandle = {
      id,
      process: child,
      httpPort: undefined,
      publicDir: undefined,
      load: { sessions: 0, lagMs: 0, cpuPercent: 0, memoryMb: 0, methodP95Ms: 0 },
      pending: 0,
      send: (message, socket) => {
        if (!child.connected) {
          socket?.destroy();
          return;
        }
        child.send(message, socket, (error) => {
          if (error) socket?.destroy();
        });
      },
    };
    this.workers.set(id, worker);
    return new Promise((resolve) => {
      child.on('message', (message: WorkerToPrimary) => {
        if (message.type === 'ready') {
          worker.httpPort = message.httpPort;
          worker.publicDir = message.publicDir;
          this.options.log.info('worker ready', { worker: id, pid: child.pid });
          resolve();
        } else if (message.type === 'load') {
          worker.load = { sessions: message.sessions, lagMs: message.lagMs, cpuPercent: message.cpuPercent, memoryMb: message.memoryMb, methodP95Ms: message.methodP95Ms, methodsPerSec: message.methodsPerSec };
          worker.pending = 0;
        }
        this.options.onMessage(worker, message);
      });
      child.once('exit', (code, signal) => {
        this.workers.delete(id);
        for (const [session, entry] of this.sticky) if (entry.worker === worker) this.sticky.delete(session);
        this.options.onExit(worker);
        resolve();
        if (this.stopping) return;
        // Replace it, waiting longer when workers keep dying.
        const now = Date.now();
        this.restarts.push(now);
        while (this.restarts.length && this.restarts[0]! < now - 60000) this.restarts.shift();
        const delay = 500 * this.restarts.length;
        this.options.log.warn('worker died; replacing it', { worker: id, pid: child.pid, code, signal, inMs: delay });
        setTimeout(() => {
          if (!this.stopping) void this.spawn();
        }, delay).unref();
      });
    });
  }
}
