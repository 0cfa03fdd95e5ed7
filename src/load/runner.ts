/**
 * Runs a scenario as many simulated users: arriving by phases (each user runs
 * it once), or at a fixed concurrency (each user runs it over and over). Every
 * run is bounded: a maximum number of users, and a deadline after which users
 * still running are stopped.
 */
import { connectClient } from './clients.js';
import type { ClientCounters, LoadClient } from './load-client.js';
import { Measurements, type EncodedMeasurements, type LatencySummary, type TimelinePoint } from './measurements.js';
import type { Phase, Scenario, ScenarioContext } from './scenario.js';

export interface RunOptions {
  /** Servers; each new user connects to the next one in turn. */
  urls: readonly string[];
  scenario: Scenario;
  client: 'lean' | 'full';
  phases?: Phase[];
  concurrency?: number;
  /** Seconds a fixed-concurrency run lasts. */
  duration?: number;
  /** Scenario runs per user in a fixed-concurrency run (default: until the duration is over). */
  iterations?: number;
  thinkMs: number;
  /** Longest any one wait (connect, call, subscription) may take. */
  timeoutMs: number;
  /** Refuse runs that would start more users than this. */
  maxUsers: number;
  /** How long users may go on after the last one started, before they are stopped. */
  graceSeconds: number;
  params: Record<string, string>;
  /** Called every second with a one-line summary, and once at the end. */
  onProgress?(line: string, progress: Progress): void;
  /**
   * Run only this process's share of the users (those whose number is `index`
   * modulo `of`), starting at wall-clock time `startAt` (ms) so that every
   * process's arrivals line up; the result then carries its raw measurements.
   */
  share?: { index: number; of: number; startAt: number };
  /** Extra figures for the progress line (e.g. the server's CPU). */
  progressExtra?(): string;
  /** Stops the run early (Ctrl-C): users still running are stopped, and what was measured is the result. */
  signal?: AbortSignal;
}

export interface Progress {
  seconds: number;
  final: boolean;
  started: number;
  active: number;
  completed: number;
  errors: number;
}

export interface RunResult {
  seconds: number;
  users: { planned: number; started: number; completed: number; failed: number; aborted: number; maxActive: number };
  measures: Record<string, LatencySummary>;
  counts: Record<string, number>;
  errors: Record<string, number>;
  traffic: ClientCounters;
  generatorCpuSeconds: number;
  timeline: TimelinePoint[];
  /** With `share`: what was measured, for merging. */
  raw?: EncodedMeasurements;
  /** Stopped early by `signal`: the figures cover only part of the run. */
  interrupted?: true;
  /** With --processes: generator processes that died before reporting, each in a line; their users' figures are missing. */
  lostGenerators?: string[];
}

class StoppedError extends Error {}

/**
 * How long users may take to end once stopped (by the deadline or a Ctrl-C)
 * before they are given up and counted as stopped: a scenario can await
 * something that never settles, and the run must still end. Longer than a
 * lean connection's closing handshake takes at most.
 */
const STOP_WAIT_MS = 5000;

/** Milliseconds from a run's start by which every user has ended or been given up: its last arrival (or a fixed run's end), the grace, and the wait for stopped users. */
export function runLimitMs(options: Pick<RunOptions, 'phases' | 'concurrency' | 'duration' | 'graceSeconds'>): number {
  const arrivalsEnd = options.concurrency !== undefined ? (options.duration ?? 60) * 1000 : (arrivalTimes(options.phases ?? []).at(-1) ?? 0);
  return arrivalsEnd + options.graceSeconds * 1000 + STOP_WAIT_MS;
}

/** Start times (ms after the beginning) of every arrival in the phases: rate r(t) grows linearly within a phase. */
export function arrivalTimes(phases: Phase[]): number[] {
  const times: number[] = [];
  let offset = 0;
  for (const { duration, arrivalRate: a, rampTo } of phases) {
    const b = rampTo ?? a;
    const total = Math.round(((a + b) / 2) * duration);
    for (let k = 0; k < total; k++) {
      // The k-th arrival is where the arrivals so far, a·t + (b−a)·t²/(2·duration), reach k.
      let t: number;
      if (Math.abs(b - a) < 1e-9) t = k / a;
      else {
        const q = (b - a) / (2 * duration);
        t = (-a + Math.sqrt(a * a + 4 * q * k)) / (2 * q);
      }
      times.push(offset + t * 1000);
    }
    offset += duration * 1000;
  }
  return times;
}

/**
 * Short kinds for error counts: DDP errors by code and reason, others by their
 * first words. The reason says what a bare code does not: a scenario run
 * against an app without its methods shows `ddp 404 Method 'insertTask' not found`.
 */
function errorKind(error: unknown): string {
  const e = error as { error?: unknown; reason?: unknown; message?: string } | null;
  if (e && (typeof e.error === 'string' || typeof e.error === 'number')) {
    return `ddp ${String(e.error)}${typeof e.reason === 'string' && e.reason ? ` ${e.reason.slice(0, 60)}` : ''}`;
  }
  const message = e?.message ?? String(error);
  if (message.startsWith('timeout')) return 'timeout';
  return message.split(/[:(]/)[0]!.trim().slice(0, 60) || 'error';
}

export async function runLoad(options: RunOptions): Promise<RunResult> {
  const fixed = options.concurrency !== undefined;
  const arrivals = fixed ? [] : arrivalTimes(options.phases ?? []);
  const total = fixed ? options.concurrency! : arrivals.length;
  if (total === 0) throw new Error('the run would start no user: check --rate/--duration or --concurrency');
  if (total > options.maxUsers) throw new Error(`the run would start ${total} users, more than --max-users ${options.maxUsers}`);
  // The users this process runs (all of them unless it has a share), by number.
  const share = options.share;
  const mine = Array.from({ length: total }, (_, vu) => vu).filter((vu) => !share || vu % share.of === share.index);
  const planned = mine.length;
  if (share) await new Promise((r) => setTimeout(r, Math.max(0, share.startAt - Date.now())));

  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const measurements = new Measurements(t0);
  const counts = new Map<string, number>();
  const traffic: ClientCounters = { messagesIn: 0, bytesIn: 0, messagesOut: 0, bytesOut: 0 };
  const clients = new Set<LoadClient>();
  const closing = new Set<Promise<void>>();
  const users = { planned, started: 0, completed: 0, failed: 0, aborted: 0, maxActive: 0 };
  const arrivalsEnd = fixed ? (options.duration ?? 60) * 1000 : (arrivals.at(-1) ?? 0);
  const errorCount = () => [...measurements.errors.values()].reduce((a, b) => a + b, 0);
  const progressOf = (seconds: number, final: boolean): Progress => ({ seconds, final, started: users.started, active, completed: users.completed, errors: errorCount() });
  const hardDeadline = t0 + arrivalsEnd + options.graceSeconds * 1000;
  let stopping = false;
  let active = 0;

  /** Pending sleeps, so that stopping the run wakes (and ends) every user at once. */
  const stopTimers = new Set<() => void>();
  const sleep = (ms: number) =>
    new Promise<void>((resolve, reject) => {
      if (stopping) return reject(new StoppedError('stopped'));
      const stop = () => {
        clearTimeout(timer);
        reject(new StoppedError('stopped'));
      };
      const timer = setTimeout(() => {
        stopTimers.delete(stop);
        resolve();
      }, ms);
      stopTimers.add(stop);
    });

  let nextUrl = 0;
  const runOnce = async (vu: number): Promise<void> => {
    let client: LoadClient | undefined;
    const ctx: ScenarioContext = {
      vu,
      params: options.params,
      thinkMs: options.thinkMs,
      get running() {
        return !stopping && (!fixed || performance.now() - t0 < arrivalsEnd);
      },
      sleep: (ms) => (ms > 0 ? sleep(ms) : Promise.resolve()),
      think: () => (options.thinkMs > 0 ? sleep(options.thinkMs) : Promise.resolve()),
      measure: async (name, fn) => {
        const started = performance.now();
        const value = await fn();
        measurements.record(name, performance.now() - started);
        return value;
      },
      count: (name, by = 1) => counts.set(name, (counts.get(name) ?? 0) + by),
    };
    try {
      client = await ctx.measure('connect', () => connectClient(options.client, options.urls[nextUrl++ % options.urls.length]!, traffic, options.timeoutMs));
      clients.add(client);
      await options.scenario(client, ctx);
      users.completed++;
      measurements.userCompleted();
    } catch (error) {
      if (error instanceof StoppedError || stopping) users.aborted++;
      else {
        users.failed++;
        measurements.error(errorKind(error));
      }
    } finally {
      if (client) {
        clients.delete(client);
        const closed = client.close().finally(() => closing.delete(closed));
        closing.add(closed);
      }
    }
  };

  const runUser = async (vu: number): Promise<void> => {
    users.started++;
    measurements.userStarted();
    active++;
    users.maxActive = Math.max(users.maxActive, active);
    measurements.active(active);
    try {
      if (!fixed) await runOnce(vu);
      else {
        for (let i = 0; (options.iterations === undefined || i < options.iterations) && !stopping && performance.now() - t0 < arrivalsEnd; i++) {
          await runOnce(vu);
        }
      }
    } finally {
      active--;
      measurements.active(active);
    }
  };

  const progress = setInterval(() => {
    measurements.active(active);
    const seconds = (performance.now() - t0) / 1000;
    const errors = errorCount();
    const main = measurements.busiest();
    const p99 = measurements.recentP99(main);
    options.onProgress?.(
      `${seconds.toFixed(0).padStart(4)}s  users ${users.started}/${planned}  active ${active}  done ${users.completed}  errors ${errors}` +
        `  ${main} p99 ${Number.isFinite(p99) ? `${p99.toFixed(1)} ms` : '-'}${options.progressExtra ? `  ${options.progressExtra()}` : ''}`,
      progressOf(seconds, false),
    );
  }, 1000);

  const running: Array<Promise<void>> = [];
  let giveUp: () => void = () => undefined;
  const givenUp = new Promise<void>((resolve) => (giveUp = resolve));
  let giveUpTimer: NodeJS.Timeout | undefined;
  const stopAll = () => {
    if (stopping) return;
    stopping = true;
    for (const stop of stopTimers) stop();
    for (const client of clients) void client.close();
    giveUpTimer = setTimeout(giveUp, STOP_WAIT_MS);
  };
  // Bounded in time: whoever is still running is stopped.
  const deadline = setTimeout(stopAll, hardDeadline - performance.now());
  const interrupt = () => {
    interrupted = true;
    stopAll();
  };
  let interrupted = false;
  if (options.signal?.aborted) interrupt();
  options.signal?.addEventListener('abort', interrupt, { once: true });
  try {
    if (fixed) {
      // Start the fixed crowd over one second rather than all in one instant.
      for (const vu of mine) {
        if (stopping) break;
        running.push(runUser(vu));
        await new Promise((r) => setTimeout(r, 1000 / planned));
      }
    } else {
      for (const vu of mine) {
        const wait = t0 + arrivals[vu]! - performance.now();
        // A stop ends the wait for the next arrival too.
        if (wait > 0) await sleep(wait).catch(() => undefined);
        if (stopping) break;
        running.push(runUser(vu));
      }
    }
    await Promise.race([Promise.all(running), givenUp]);
    // Users that did not end when stopped are left behind (their scenario awaits what never settles).
    users.aborted += active;
    // Messages still arriving at closing users count as traffic of this run.
    await Promise.race([Promise.all(closing), givenUp]);
  } finally {
    clearTimeout(deadline);
    clearTimeout(giveUpTimer);
    clearInterval(progress);
    options.signal?.removeEventListener('abort', interrupt);
  }
  const cpu = process.cpuUsage(cpu0);
  const result: RunResult = {
    seconds: (performance.now() - t0) / 1000,
    // A copy: users left behind may still end, and must not change the result.
    users: { ...users },
    measures: measurements.summaries(),
    counts: Object.fromEntries(counts),
    errors: Object.fromEntries(measurements.errors),
    traffic,
    generatorCpuSeconds: (cpu.user + cpu.system) / 1e6,
    timeline: measurements.timeline(),
    ...(share ? { raw: measurements.encode() } : {}),
    ...(interrupted ? { interrupted } : {}),
  };
  options.onProgress?.(`${result.seconds.toFixed(0).padStart(4)}s  done: ${users.completed} completed, ${users.failed} failed, ${users.aborted} stopped`, progressOf(result.seconds, true));
  return result;
}
