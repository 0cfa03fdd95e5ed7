/**
 * Starting and stopping the test services as background processes on loopback:
 * pidfiles, logs, readiness checks, and signals sent only to the pid we started
 * (checked against its command line, so a recycled pid is never signalled).
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';

export const HOST = '127.0.0.1';
export const RUN_DIR = process.env.PERSEID_SERVICES_RUN_DIR ?? join(tmpdir(), 'perseid-services');
export const CACHE_DIR = process.env.PERSEID_SERVICES_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'perseid-services');

export function log(name: string, message: string): void {
  process.stderr.write(`[${name}] ${message}\n`);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** True when something accepts TCP connections on 127.0.0.1:port. */
export function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: HOST, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** A free port on loopback, for private instances. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    import('node:net')
      .then(({ createServer }) => {
        const server = createServer();
        server.once('error', reject);
        server.listen(0, HOST, () => {
          const { port } = server.address() as { port: number };
          server.close(() => resolve(port));
        });
      })
      .catch(reject);
  });
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A zombie still answers kill -0 but is gone.
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

export interface Launch {
  command: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
  /** Strings the running process's command line must contain to be recognised as ours. */
  markers: string[];
}

export class ManagedProcess {
  readonly pidFile: string;
  readonly logFile: string;

  constructor(
    readonly name: string,
    readonly port: number,
  ) {
    this.pidFile = join(RUN_DIR, `${name}-${port}.pid`);
    this.logFile = join(RUN_DIR, `${name}-${port}.log`);
  }

  /** The pid of our running process, if the pidfile names a live process that is ours. */
  runningPid(markers: string[]): number | undefined {
    if (!existsSync(this.pidFile)) return undefined;
    const pid = Number(readFileSync(this.pidFile, 'utf8').trim());
    if (!Number.isInteger(pid) || !pidAlive(pid)) return undefined;
    const cmd = commandLine(pid);
    return markers.every((m) => cmd.includes(m)) ? pid : undefined;
  }

  async start(launch: Launch, ready: () => Promise<boolean>, timeoutMs = 60000): Promise<number> {
    const existing = this.runningPid(launch.markers);
    if (existing) return existing;
    if (await portOpen(this.port)) throw new Error(`${this.name}: port ${this.port} is already in use by another process`);
    mkdirSync(RUN_DIR, { recursive: true });
    const out = openSync(this.logFile, 'a');
    const child = spawn(launch.command, launch.args, {
      detached: true,
      stdio: ['ignore', out, out],
      env: { ...process.env, ...launch.env },
    });
    closeSync(out);
    child.unref();
    const pid = child.pid!;
    writeFileSync(this.pidFile, `${pid}\n`);
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (!pidAlive(pid)) {
        rmSync(this.pidFile, { force: true });
        throw new Error(`${this.name} exited during startup; see ${this.logFile}:\n${this.tail()}`);
      }
      if (await ready()) return pid;
      await sleep(100);
    }
    await this.stop(launch.markers);
    throw new Error(`${this.name} not ready after ${timeoutMs} ms; see ${this.logFile}:\n${this.tail()}`);
  }

  /** SIGTERM, then SIGKILL after `graceMs`; only ever signals our own pid. Resolves with the pid it stopped, if any. */
  async stop(markers: string[], graceMs = 15000): Promise<number | undefined> {
    const pid = this.runningPid(markers);
    if (pid) {
      process.kill(pid, 'SIGTERM');
      const deadline = Date.now() + graceMs;
      while (pidAlive(pid) && Date.now() < deadline) await sleep(50);
      if (pidAlive(pid)) {
        log(this.name, `pid ${pid} ignored SIGTERM for ${graceMs} ms; sending SIGKILL`);
        process.kill(pid, 'SIGKILL');
        while (pidAlive(pid)) await sleep(50);
      }
    }
    rmSync(this.pidFile, { force: true });
    return pid;
  }

  /** Deletes `dataDir` and this process's log (after stop). */
  remove(dataDir: string): void {
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(this.logFile, { force: true });
  }

  tail(lines = 20): string {
    try {
      return readFileSync(this.logFile, 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }
}
