/**
 * One fuzz run: spawn a Perseid server on loopback (the fuzz app, a fresh
 * embedded store), point fuzzing connections of every transport at it until
 * the frame count or the time is spent, and all along probe `/health` and a
 * real DDP round trip and sample the server's memory. The run fails if the
 * server exits, a probe fails, or memory passes its bound.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import WebSocket from 'ws';
import { createWithSeeds } from '../../src/ddp/random.js';
import { Budget, fuzzerFor, Tally, TRANSPORTS, type Tallies } from './connections.js';
import { FrameGenerator } from './generate.js';

export interface FuzzOptions {
  /** Frames to send in all (default 1,000,000). */
  frames: number;
  /** Stop after this long even if frames remain (default 600). */
  seconds: number;
  /** Fuzzing connections at a time, spread over the transports (default 24). */
  connections: number;
  seed: string;
  /** The run fails if the server's resident memory passes this (default 768). */
  maxRssMiB: number;
  /** How often /health, the DDP round trip and memory are checked. */
  probeMs: number;
  /** A probe not answered within this long counts as failed. */
  probeTimeoutMs: number;
  onProgress?(progress: Progress): void;
}

export const DEFAULT_OPTIONS: FuzzOptions = { frames: 1_000_000, seconds: 600, connections: 24, seed: 'perseid-fuzz', maxRssMiB: 768, probeMs: 250, probeTimeoutMs: 5000 };

export interface Progress {
  elapsedMs: number;
  frames: number;
  replies: number;
  rssMiB: number;
  healthMs: number | undefined;
  ddpMs: number | undefined;
}

export interface ProbeFigures {
  ok: number;
  failed: number;
  p50: number;
  p99: number;
  max: number;
  failures: string[];
}

export interface FuzzReport {
  options: Omit<FuzzOptions, 'onProgress'>;
  elapsedMs: number;
  sent: Record<string, number>;
  replies: Record<string, number>;
  closes: Record<string, number>;
  http: Record<string, number>;
  probes: { health: ProbeFigures; ddp: ProbeFigures };
  rss: { startMiB: number; maxMiB: number; endMiB: number };
  /** Set when the server exited during the run. */
  serverExit?: string;
  serverLog: string[];
  failures: string[];
}

const CLI = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));
const APP = fileURLToPath(new URL('./app.js', import.meta.url));
const MAX_MESSAGE_SIZE = 1024 * 1024; // the server's default

function rssMiB(pid: number): number {
  try {
    const kib = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return Math.round(Number(kib) / 1024);
  } catch {
    return 0;
  }
}

interface Server {
  child: ChildProcess;
  port: number;
  log: string[];
  exit?: string;
}

function startServer(dataDir: string): Promise<Server> {
  const child = spawn(process.execPath, [CLI, 'start', APP, '--port', '0', '--data-dir', dataDir, '--log-level', 'info'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, PERSEID_LOG_LEVEL: 'info' },
  });
  const server: Server = { child, port: 0, log: [] };
  const keep = (chunk: Buffer) => {
    server.log.push(...chunk.toString().split('\n').filter(Boolean));
    if (server.log.length > 200) server.log.splice(0, server.log.length - 200);
  };
  return new Promise((resolve, reject) => {
    const onStart = (chunk: Buffer) => {
      const match = /Perseid is running at http:\/\/[^:]+:(\d+)/.exec(chunk.toString());
      if (!match) return;
      server.port = Number(match[1]);
      child.stdout!.off('data', onStart);
      child.stderr!.off('data', onStart);
      resolve(server);
    };
    child.stdout!.on('data', onStart);
    child.stderr!.on('data', onStart);
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    child.once('exit', (code, signal) => {
      server.exit = signal ? `killed by ${signal}` : `exited with status ${code}`;
      reject(new Error(`the server ${server.exit}: ${server.log.slice(-10).join('\n')}`));
    });
  });
}

function figures(latencies: number[], failures: string[]): ProbeFigures {
  const sorted = [...latencies].sort((a, b) => a - b);
  const at = (q: number) => Math.round(sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] ?? 0);
  return { ok: latencies.length, failed: failures.length, p50: at(0.5), p99: at(0.99), max: Math.round(sorted.at(-1) ?? 0), failures: failures.slice(0, 10) };
}

/** A client that keeps making a real DDP round trip (a method call) through the run. */
class RoundTrip {
  private ws: WebSocket | undefined;
  private waiting = new Map<string, () => void>();
  private n = 0;

  constructor(private readonly url: string) {}

  /** Resolves with the round trip's time, or rejects with why it failed. */
  async once(timeoutMs: number): Promise<number> {
    const ws = await this.connection(timeoutMs);
    const id = `probe-${++this.n}`;
    const started = performance.now();
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`no result within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiting.set(id, () => {
        clearTimeout(timer);
        resolve();
      });
      ws.send(JSON.stringify({ msg: 'method', id, method: 'echo', params: [{ n: this.n, at: { $date: Date.now() } }] }));
    });
    return performance.now() - started;
  }

  close(): void {
    this.ws?.terminate();
  }

  private async connection(timeoutMs: number): Promise<WebSocket> {
    if (this.ws?.readyState === WebSocket.OPEN) return this.ws;
    const ws = new WebSocket(this.url, { perMessageDeflate: false, handshakeTimeout: timeoutMs });
    await new Promise<void>((resolve, reject) => {
      ws.once('error', reject);
      ws.on('message', (data) => {
        const m = JSON.parse(data.toString()) as { msg: string; id?: string };
        if (m.msg === 'connected') resolve();
        if (m.msg === 'result' && m.id) this.waiting.get(m.id)?.();
      });
      ws.once('open', () => ws.send(JSON.stringify({ msg: 'connect', version: '1', support: ['1'] })));
      ws.once('close', () => reject(new Error('closed before connecting')));
    });
    ws.on('error', () => undefined);
    this.ws = ws;
    return ws;
  }
}

export async function runFuzz(given: Partial<FuzzOptions> = {}): Promise<FuzzReport> {
  const options = { ...DEFAULT_OPTIONS, ...given };
  const dataDir = mkdtempSync(join(tmpdir(), 'perseid-fuzz-'));
  const server = await startServer(dataDir);
  server.child.removeAllListeners('exit');
  server.child.once('exit', (code, signal) => (server.exit = signal ? `killed by ${signal}` : `exited with status ${code}`));
  const pid = server.child.pid!;
  const tallies: Tallies = { sent: new Tally(), replies: new Tally(), closes: new Tally(), http: new Tally() };
  const started = Date.now();
  const budget = new Budget(options.frames, started + options.seconds * 1000);
  const target = { port: server.port, maxMessageSize: MAX_MESSAGE_SIZE };
  const random = createWithSeeds(options.seed);
  const fuzzers = Array.from({ length: options.connections }, (_, i) =>
    fuzzerFor(TRANSPORTS[i % TRANSPORTS.length]!, target, new FrameGenerator(createWithSeeds(options.seed, i, random.fraction()), MAX_MESSAGE_SIZE), tallies),
  );

  const rss = { startMiB: rssMiB(pid), maxMiB: 0, endMiB: 0 };
  rss.maxMiB = rss.startMiB;
  const health = { latencies: [] as number[], failures: [] as string[], last: undefined as number | undefined };
  const ddp = { latencies: [] as number[], failures: [] as string[], last: undefined as number | undefined };
  const roundTrip = new RoundTrip(`ws://127.0.0.1:${server.port}/websocket`);
  let fuzzing = true;

  async function probe(): Promise<void> {
    const at = `${((Date.now() - started) / 1000).toFixed(1)} s`;
    const t0 = performance.now();
    try {
      const reply = await fetch(`http://127.0.0.1:${server.port}/health`, { signal: AbortSignal.timeout(options.probeTimeoutMs) });
      if (reply.status !== 200) throw new Error(`status ${reply.status}`);
      health.last = performance.now() - t0;
      health.latencies.push(health.last);
    } catch (error) {
      health.failures.push(`${at}: ${(error as Error).message}`);
    }
    try {
      ddp.last = await roundTrip.once(options.probeTimeoutMs);
      ddp.latencies.push(ddp.last);
    } catch (error) {
      ddp.failures.push(`${at}: ${(error as Error).message}`);
    }
    const now = rssMiB(pid);
    if (now > 0) rss.maxMiB = Math.max(rss.maxMiB, now);
  }

  const probing = (async () => {
    while (fuzzing && !server.exit) {
      const next = Date.now() + options.probeMs;
      await probe();
      options.onProgress?.({
        elapsedMs: Date.now() - started,
        frames: tallies.sent.total(),
        replies: tallies.replies.total(),
        rssMiB: rssMiB(pid),
        healthMs: health.last,
        ddpMs: ddp.last,
      });
      await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())));
    }
  })();

  await Promise.all(fuzzers.map((f) => f.run(budget).catch((error: Error) => tallies.closes.add(`fuzzer failed: ${error.message}`))));
  fuzzing = false;
  await probing;
  // After the storm: the server must still be whole.
  await probe();
  rss.endMiB = rssMiB(pid);
  roundTrip.close();

  const report: FuzzReport = {
    options: { frames: options.frames, seconds: options.seconds, connections: options.connections, seed: options.seed, maxRssMiB: options.maxRssMiB, probeMs: options.probeMs, probeTimeoutMs: options.probeTimeoutMs },
    elapsedMs: Date.now() - started,
    sent: Object.fromEntries(tallies.sent.counts),
    replies: Object.fromEntries(tallies.replies.counts),
    closes: Object.fromEntries(tallies.closes.counts),
    http: Object.fromEntries(tallies.http.counts),
    probes: { health: figures(health.latencies, health.failures), ddp: figures(ddp.latencies, ddp.failures) },
    rss,
    serverExit: server.exit,
    serverLog: [],
    failures: [],
  };
  if (server.exit) report.failures.push(`the server ${server.exit}`);
  if (health.failures.length) report.failures.push(`${health.failures.length} /health probes failed`);
  if (ddp.failures.length) report.failures.push(`${ddp.failures.length} DDP round trips failed`);
  if (rss.maxMiB > options.maxRssMiB) report.failures.push(`the server's memory reached ${rss.maxMiB} MiB (bound ${options.maxRssMiB} MiB)`);
  if (tallies.sent.total() === 0) report.failures.push('nothing was sent');

  if (!server.exit) {
    server.child.kill('SIGINT'); // stop at once: nothing is left to drain
    await Promise.race([new Promise((r) => server.child.once('exit', r)), new Promise((r) => setTimeout(r, 5000))]);
    if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
  }
  report.serverLog = server.log.filter((line) => / (ERROR|WARN) /.test(line)).slice(-20);
  rmSync(dataDir, { recursive: true, force: true });
  return report;
}
