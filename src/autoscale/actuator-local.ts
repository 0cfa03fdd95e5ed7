/**
 * An actuator that starts and drains Perseid processes on this machine:
 * `perseid autoscale --local app.js`. Choose it to try autoscaling on one
 * machine, or where servers are plain processes (the tests use it). Each
 * process it starts is `perseid start <app> --port <free> --public-url
 * http://<host>:<port>` plus the arguments given, with this process's
 * environment (MONGO_URL, REDIS_URL: the cluster they join). Going down, it
 * sends SIGTERM to its least loaded processes, which drain (leave discovery,
 * close their connections spread over --drain-ms) and exit. Servers it did
 * not start count towards the total but are never stopped.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { ServerEntry } from '../cluster/discovery-store.js';
import type { Logger } from '../log.js';
import { checkScaleTarget, leastLoaded, type Actuator } from './actuator.js';

const CLI = fileURLToPath(new URL('../cli/main.js', import.meta.url));

export interface LocalActuatorOptions {
  /** The app module each process runs. */
  app: string;
  /** More `perseid start` arguments (e.g. --balancer, --drain-ms 2000). */
  args?: string[];
  env?: NodeJS.ProcessEnv;
  /** Address to bind and announce (default 127.0.0.1). */
  host?: string;
  /** Longest a process may take to say it is running (default 30000 ms). */
  startTimeoutMs?: number;
  /** Longest a process may take to drain and exit before it is killed (default 120000 ms). */
  stopTimeoutMs?: number;
  log: Logger;
}

interface Local {
  child: ChildProcess;
  url: string;
  stopping: boolean;
  /** Resolves once it has exited and its output has all been passed on (its pipes closed after it). */
  closed: Promise<void>;
}

function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, host, () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

function tail(output: string): string {
  return output.trim().split('\n').slice(-3).join(' | ') || 'no output';
}

export class LocalActuator implements Actuator {
  readonly name = 'local';
  readonly acts = true;
  private readonly locals: Local[] = [];
  private readonly host: string;

  constructor(private readonly options: LocalActuatorOptions) {
    this.host = options.host ?? '127.0.0.1';
  }

  /** The URLs of the processes it runs (not stopping). */
  get urls(): string[] {
    return this.locals.filter((l) => !l.stopping).map((l) => l.url);
  }

  async current(servers: readonly ServerEntry[]): Promise<number> {
    const mine = new Set(this.locals.map((l) => l.url));
    return servers.filter((s) => !mine.has(s.url)).length + this.urls.length;
  }

  async settling(servers: readonly ServerEntry[]): Promise<string | undefined> {
    const seen = new Set(servers.map((s) => s.url));
    const starting = this.locals.filter((l) => !l.stopping && !seen.has(l.url)).length;
    const draining = this.locals.filter((l) => l.stopping).length;
    if (starting === 0 && draining === 0) return undefined;
    return [starting && `${starting} starting`, draining && `${draining} draining`].filter(Boolean).join(', ');
  }

  async scaleTo(n: number, servers: readonly ServerEntry[]): Promise<void> {
    checkScaleTarget(n);
    const from = await this.current(servers);
    if (n > from) {
      await Promise.all(Array.from({ length: n - from }, () => this.startOne()));
      return;
    }
    const mine = this.locals.filter((l) => !l.stopping);
    const byUrl = new Map(mine.map((l) => [l.url, l]));
    // Ours that discovery lists, least loaded first; then ours it does not list yet (no clients to move).
    const listed = leastLoaded(servers, from - n, (s) => byUrl.has(s.url)).map((s) => byUrl.get(s.url)!);
    const unlisted = mine.filter((l) => !servers.some((s) => s.url === l.url));
    const leaving = [...unlisted, ...listed].slice(0, from - n);
    if (leaving.length < from - n) this.options.log.warn('cannot go that low: the other servers were not started here', { wanted: n, removable: mine.length });
    for (const local of leaving) this.drain(local);
  }

  async close(): Promise<void> {
    for (const local of this.locals) if (!local.stopping) this.drain(local);
    await Promise.all(this.locals.map((l) => l.closed));
  }

  private async startOne(): Promise<void> {
    const port = await freePort(this.host);
    const url = `http://${this.host}:${port}`;
    const args = [CLI, 'start', this.options.app, '--port', String(port), '--host', this.host, '--public-url', url, ...(this.options.args ?? [])];
    // A group of its own: a terminal's Ctrl-C reaches the autoscaler alone, which drains it; hearing the SIGINT too, it
    // stopped at once and took the drain's SIGTERM for a second signal. The IPC channel stops it if the autoscaler dies.
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe', 'ipc'], detached: true, env: { ...process.env, ...this.options.env } });
    const local: Local = { child, url, stopping: false, closed: new Promise((resolve) => child.once('close', () => resolve())) };
    this.locals.push(local);
    const log = this.options.log.child(`:${port}`);
    let output = '';
    const forward = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-4000);
      for (const line of chunk.toString().split('\n')) if (line.trim()) process.stderr.write(`[local :${port}] ${line}\n`);
    };
    child.stdout!.on('data', forward);
    child.stderr!.on('data', forward);
    let started = false;
    // Gone from the count as soon as it exits, started or not: a server that died starting is not one still starting.
    child.once('exit', (code, signal) => {
      const i = this.locals.indexOf(local);
      if (i >= 0) this.locals.splice(i, 1);
      if (!started) return;
      if (!local.stopping) log.warn('a local server exited', { code, signal });
      else log.info('a local server drained and exited', { url });
    });
    // Started once it answers /health (whatever its log level lets it print).
    const timeoutMs = this.options.startTimeoutMs ?? 30_000;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`a local server exited with ${child.exitCode ?? child.signalCode} while starting: ${tail(output)}`);
      if (await fetch(`${url}/health`).then((r) => r.ok, () => false)) break;
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`a local server did not start within ${timeoutMs} ms: ${tail(output)}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    started = true;
    log.info('started a local server', { url, pid: child.pid });
  }

  private drain(local: Local): void {
    local.stopping = true;
    this.options.log.info('draining a local server', { url: local.url, pid: local.child.pid });
    local.child.kill('SIGTERM');
    const timer = setTimeout(() => local.child.kill('SIGKILL'), this.options.stopTimeoutMs ?? 120_000);
    timer.unref();
    void local.closed.then(() => clearTimeout(timer));
  }
}
