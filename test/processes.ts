/**
 * Real `perseid` processes for the suites that need them (CLI, workers,
 * clusters), and the waiting and peers those suites share.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import SockJS from 'sockjs-client';
import type WebSocket from 'ws';
import type { Message } from './helpers.js';

export const CLI = 'dist/src/cli/main.js';

export interface PerseidProcess {
  child: ChildProcess;
  url: string;
  port: number;
  log(): string;
  /** Sends `signal` and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.once('exit', (code) => resolve(code));
  });
}

/** Runs `perseid start <app> <args>`; resolves once it says where it is running. */
export function startPerseid(app: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<PerseidProcess> {
  const child = spawn(process.execPath, [CLI, 'start', app, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let log = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      log += chunk.toString();
      if (process.env.PERSEID_TEST_ECHO) process.stderr.write(chunk);
      const match = /Perseid is running at (http:\/\/\S+)/.exec(log);
      if (match) {
        child.stdout!.off('data', onData);
        child.stderr!.off('data', onData);
        const keep = (more: Buffer) => void (log += more.toString());
        child.stdout!.on('data', keep);
        child.stderr!.on('data', keep);
        const url = match[1]!;
        resolve({
          child,
          url,
          port: Number(new URL(url).port),
          log: () => log,
          stop: (signal = 'SIGTERM') => {
            child.kill(signal);
            return exited(child);
          },
        });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`perseid exited with ${code}: ${log}`)));
  });
}

export interface PerseidCommand {
  child: ChildProcess;
  /** What it wrote so far, stdout and stderr interleaved. */
  output(): string;
  /** Sends `signal` and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Runs `perseid <args>` (a command that prints no "running at" line, `autoscale` say), collecting its output. */
export function spawnPerseid(args: string[], env: NodeJS.ProcessEnv = {}): PerseidCommand {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let output = '';
  const keep = (chunk: Buffer) => {
    output += chunk.toString();
    if (process.env.PERSEID_TEST_ECHO) process.stderr.write(chunk);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return {
    child,
    output: () => output,
    stop: (signal = 'SIGTERM') => {
      child.kill(signal);
      return exited(child);
    },
  };
}

/** Polls `check` until it holds; fails naming `what` after `timeoutMs`. */
export async function eventually(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A DDP peer speaking through sockjs-client (npm) with the transports given. */
export class SockjsPeer {
  readonly received: Message[] = [];
  closed: { code: number; reason: string } | undefined;
  private constructor(private readonly socket: WebSocket) {}

  static open(url: string, transports: string | string[]): Promise<SockjsPeer> {
    return new Promise((resolve, reject) => {
      const socket = new SockJS(url, undefined, { transports: [transports].flat() }) as unknown as WebSocket;
      const peer = new SockjsPeer(socket);
      socket.onmessage = (event) => peer.received.push(JSON.parse(String(event.data)) as Message);
      socket.onopen = () => {
        socket.onclose = (event) => (peer.closed = { code: event.code, reason: event.reason });
        resolve(peer);
      };
      socket.onclose = (event) => reject(new Error(`closed ${event.code} ${event.reason}`));
    });
  }

  /** The URL the transport really talks to (after a balancer's `base_url`). */
  get transportUrl(): string {
    return (this.socket as unknown as { _transUrl: string })._transUrl;
  }

  send(message: unknown): void {
    this.socket.send(JSON.stringify(message));
  }

  /** Sends `text` as one DDP message as it is (it need not be JSON). */
  sendText(text: string): void {
    this.socket.send(text);
  }

  async next(match: (m: Message) => boolean, timeoutMs = 5000): Promise<Message> {
    let found: Message | undefined;
    await eventually(() => (found = this.received.find(match)) !== undefined, 'a SockJS message', timeoutMs);
    return found!;
  }

  /** Connects DDP and calls `method`, resolving with its result. */
  async call(id: string, method: string, params: unknown[] = []): Promise<unknown> {
    if (!this.received.some((m) => m.msg === 'connected')) {
      this.send({ msg: 'connect', version: '1', support: ['1'] });
      await this.next((m) => m.msg === 'connected');
    }
    this.send({ msg: 'method', id, method, params });
    const reply = await this.next((m) => m.msg === 'result' && m.id === id);
    if (reply.error) throw Object.assign(new Error(String((reply.error as Message).reason)), reply.error);
    return reply.result;
  }

  close(): void {
    this.socket.onclose = null;
    this.socket.close();
  }
}
