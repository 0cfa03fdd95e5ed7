/**
 * `perseid load --processes n`: the users spread over n generator processes
 * (user k runs in process k mod n, all starting from one agreed instant), their
 * measurements merged into one result, so that one core is not what limits
 * the load. Each process is a fork of `entry`, which answers one
 * GeneratorRequest with progress and then its GeneratorMessage result.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { Measurements } from './measurements.js';
import { LoadSetupError } from './setup-error.js';
import { arrivalTimes, runLimitMs, type Progress, type RunOptions, type RunResult } from './runner.js';

export type SerializableRunOptions = Omit<RunOptions, 'scenario' | 'onProgress' | 'progressExtra' | 'share' | 'signal'>;

export interface GeneratorRequest {
  /** A built-in scenario's name, or a script's absolute path. */
  scenario: string;
  options: SerializableRunOptions;
  share: NonNullable<RunOptions['share']>;
}

/** Sent after the request when the run is stopped early (Ctrl-C, which the generator processes leave to this one). */
export interface GeneratorStop {
  kind: 'stop';
}

export type GeneratorMessage = { kind: 'progress'; progress: Progress } | { kind: 'result'; result: RunResult } | { kind: 'error'; message: string };

export interface ProcessesOptions {
  processes: number;
  /** The generator process's module. */
  entry: URL;
  scenario: string;
  options: SerializableRunOptions;
  onProgress?: RunOptions['onProgress'];
  progressExtra?: RunOptions['progressExtra'];
  signal?: AbortSignal;
}

/** Adds up the processes' results: counts summed, latencies merged histogram by histogram. */
export function mergeResults(results: RunResult[]): RunResult {
  const measurements = new Measurements(0);
  for (const r of results) if (r.raw) measurements.merge(r.raw);
  const sum = (pick: (r: RunResult) => number) => results.reduce((a, r) => a + pick(r), 0);
  const counts: Record<string, number> = {};
  for (const r of results) for (const [name, n] of Object.entries(r.counts)) counts[name] = (counts[name] ?? 0) + n;
  const timeline = measurements.timeline();
  return {
    seconds: Math.max(...results.map((r) => r.seconds)),
    users: {
      planned: sum((r) => r.users.planned),
      started: sum((r) => r.users.started),
      completed: sum((r) => r.users.completed),
      failed: sum((r) => r.users.failed),
      aborted: sum((r) => r.users.aborted),
      // Each process's busiest moment in each second, added: close to (at most) the crowd at its largest.
      maxActive: Math.max(0, ...timeline.map((p) => p.active)),
    },
    measures: measurements.summaries(),
    counts,
    errors: Object.fromEntries(measurements.errors),
    traffic: {
      messagesIn: sum((r) => r.traffic.messagesIn),
      bytesIn: sum((r) => r.traffic.bytesIn),
      messagesOut: sum((r) => r.traffic.messagesOut),
      bytesOut: sum((r) => r.traffic.bytesOut),
    },
    generatorCpuSeconds: sum((r) => r.generatorCpuSeconds),
    timeline,
    ...(results.some((r) => r.interrupted) ? { interrupted: true as const } : {}),
  };
}

/** How long past its run's limit a generator process may take to report before it is killed (and its users' figures lost). */
const OVERDUE_MARGIN_MS = 3000;

export async function runLoadInProcesses(o: ProcessesOptions): Promise<RunResult> {
  const children: ChildProcess[] = [];
  const progress: Array<Progress | undefined> = new Array(o.processes).fill(undefined);
  // Time for every process to start and load the scenario before the first arrival.
  const startAt = Date.now() + 1500 + 100 * o.processes;
  const t0 = performance.now();
  const ticker = setInterval(() => {
    const known = progress.filter((p): p is Progress => p !== undefined);
    const total = (pick: (p: Progress) => number) => known.reduce((a, p) => a + pick(p), 0);
    const extra = o.progressExtra?.() ?? '';
    o.onProgress?.(
      `${((performance.now() - t0) / 1000).toFixed(0).padStart(4)}s  users ${total((p) => p.started)}  active ${total((p) => p.active)}  done ${total((p) => p.completed)}  errors ${total((p) => p.errors)}  (${o.processes} processes)${extra ? `  ${extra}` : ''}`,
      { seconds: (performance.now() - t0) / 1000, final: false, started: total((p) => p.started), active: total((p) => p.active), completed: total((p) => p.completed), errors: total((p) => p.errors) },
    );
  }, 1000);
  const stop = () => {
    for (const child of children) if (child.connected) child.send({ kind: 'stop' } satisfies GeneratorStop);
  };
  // Quitting at once (a second Ctrl-C) must not leave a process behind: one blocked in a loop would not see its parent go.
  const killAll = () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  process.once('exit', killAll);
  // A process whose event loop is blocked (a scenario that loops for ever) keeps no deadline of its own: this one ends it.
  let overdueFired = false;
  const overdue = setTimeout(
    () => {
      overdueFired = true;
      killAll();
    },
    startAt - Date.now() + runLimitMs(o.options) + OVERDUE_MARGIN_MS,
  );
  o.signal?.addEventListener('abort', stop, { once: true });
  try {
    const lost: string[] = [];
    const settled = await Promise.all(
      Array.from({ length: o.processes }, (_, index) => {
        const child = fork(o.entry, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
        children.push(child);
        return new Promise<RunResult | undefined>((resolve, reject) => {
          let settled = false;
          child.on('message', (message: GeneratorMessage) => {
            if (message.kind === 'progress') progress[index] = message.progress;
            else if (message.kind === 'result') {
              settled = true;
              resolve(message.result);
            } else {
              settled = true;
              reject(new Error(`generator process ${index + 1}: ${message.message}`));
            }
          });
          // A process that dies mid-run loses its users' figures, not the others': the run goes on and the report says what is missing.
          child.once('exit', (code, signal) => {
            if (settled) return;
            settled = true;
            const seen = progress[index];
            const users = seen ? `its ${seen.started} users so far (${seen.completed} done, ${seen.errors} errors)` : 'its users';
            const how = overdueFired ? 'was killed, not having reported by the end of the run and its grace (a scenario blocking its event loop?),' : `exited (${signal ?? `status ${code}`})`;
            lost.push(`generator process ${index + 1} ${how} ${Math.max(0, (Date.now() - startAt) / 1000).toFixed(1)} s into the run, before reporting: the figures of ${users} are missing`);
            resolve(undefined);
          });
          const request: GeneratorRequest = { scenario: o.scenario, options: o.options, share: { index, of: o.processes, startAt } };
          child.send(request);
          if (o.signal?.aborted) child.send({ kind: 'stop' } satisfies GeneratorStop);
        });
      }),
    );
    const results = settled.filter((r): r is RunResult => r !== undefined);
    if (results.length === 0) throw new LoadSetupError(`every generator process exited before reporting (${lost.join('; ')})`);
    const merged = mergeResults(results);
    if (lost.length) {
      merged.lostGenerators = lost;
      // Planned counts every user, so that 'started of planned' shows the lost processes' share missing.
      merged.users.planned = o.options.concurrency ?? arrivalTimes(o.options.phases ?? []).length;
    }
    const u = merged.users;
    o.onProgress?.(`${merged.seconds.toFixed(0).padStart(4)}s  done: ${u.completed} completed, ${u.failed} failed, ${u.aborted} stopped (${o.processes} processes)`, {
      seconds: merged.seconds,
      final: true,
      started: u.started,
      active: 0,
      completed: u.completed,
      errors: Object.values(merged.errors).reduce((a, b) => a + b, 0),
    });
    return merged;
  } finally {
    o.signal?.removeEventListener('abort', stop);
    clearInterval(ticker);
    clearTimeout(overdue);
    process.off('exit', killAll);
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  }
}
