/** What every benchmark runner does: pin processes to cores, wait for servers, stop them, report the run. */
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import { basename, dirname, join } from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { LoadReport } from '../src/load/report/model.js';

export const pinned = spawnSync('taskset', ['-c', '0', 'true']).status === 0;

/** What every program's --help says it needs. */
export const NEEDS =
  'Needs: the repository built (npm install), run from its root; two cores and taskset (util-linux): servers run on\n' +
  'core 0 and the load on core 1 (without taskset nothing is pinned, the header says so, and the figures are noisier).';

/** The command that runs `node args` on `core` (when taskset is there). */
export function onCore(core: number, args: string[]): [string, string[]] {
  return pinned ? ['taskset', ['-c', String(core), process.execPath, ...args]] : [process.execPath, args];
}

/**
 * A benchmark program's options, parsed, with `--help`/`-h` added: it prints `help` and exits, and an
 * unknown or malformed option is one line and the help, not a stack trace.
 */
export function benchOptions<O extends NonNullable<ParseArgsConfig['options']>>(help: string, options: O): ReturnType<typeof parseArgs<{ options: O }>>['values'] {
  let parsed;
  try {
    parsed = parseArgs({ options: { ...options, help: { type: 'boolean', short: 'h' } } as O });
  } catch (error) {
    console.error(`${(error as Error).message}\n\n${help}`);
    process.exit(2);
  }
  if ((parsed.values as { help?: boolean }).help) {
    console.log(help);
    process.exit(0);
  }
  return parsed.values;
}

/**
 * `perseid start` arguments every benchmark server gets: every generator connection comes from
 * 127.0.0.1, so the per-address cap (1000) would refuse S1's crowd (it peaks above 1,100).
 */
export const BENCH_SERVER_FLAGS = ['--log-level', 'warn', '--max-connections-per-address', '0'];

/** Moves an already running process (a database) to `core`. */
export function pinProcess(pid: number, core: number): void {
  if (pinned) spawnSync('taskset', ['-a', '-p', '-c', String(core), String(pid)], { stdio: 'ignore' });
}

/** A failure of the setting rather than of the program (a port taken, a server that died): one line, no stack trace. */
export class BenchError extends Error {}

/** Processes this program started that still run: a Ctrl-C or a failure stops them, so no server or generator outlives the program. */
const children = new Set<ChildProcess>();
const stoppables: Array<{ stop(): Promise<void> }> = [];

/** Folders this program made for its servers' data and reports, removed however it ends. */
const folders = new Set<string>();
process.on('exit', () => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

/** A new folder under the system's temporary one, removed when the program ends (also on Ctrl-C or a failure). */
export function tempDir(prefix: string): string {
  const folder = mkdtempSync(join(tmpdir(), prefix));
  folders.add(folder);
  return folder;
}

function stopEverything(): Promise<unknown> {
  return Promise.allSettled([...[...children].map(stopProcess), ...stoppables.map((s) => s.stop())]);
}

// Every program importing this is a benchmark's main module: its endings are handled here.
{
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      process.stderr.write(`\n${signal}: stopping the benchmark's servers and services\n`);
      void stopEverything().then(() => process.exit(130));
    });
  }
  process.on('uncaughtException', (error) => {
    process.stderr.write(`${basename(process.argv[1] ?? 'bench')}: ${error instanceof BenchError ? error.message : (error.stack ?? error.message)}\n`);
    void stopEverything().then(() => process.exit(1));
  });
}

/** On Ctrl-C, SIGTERM or a failure, stops these too (services run detached and would outlive the run). */
export function stopOnInterrupt(more: Array<{ stop(): Promise<void> }>): void {
  stoppables.push(...more);
}

/** spawn(), the child stopped with this program's servers on Ctrl-C or a failure. */
export function spawnChild(command: string, args: string[], options: SpawnOptions): ChildProcess {
  const child = spawn(command, args, options);
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

/** Refuses a port something already listens on: a server started there would exit, and the run would load the other one. */
export async function portFree(port: number): Promise<void> {
  const probe = createServer();
  const taken = await new Promise<boolean>((resolve) => {
    probe.once('error', () => resolve(true));
    probe.listen(port, '127.0.0.1', () => resolve(false));
  });
  if (taken) throw new BenchError(`port ${port} is taken: stop what listens there, or run where the ports this program uses are free`);
  await new Promise((resolve) => probe.close(resolve));
}

/** Waits for `server` to answer HTTP on `port`; fails at once if it exits first. */
export async function waitForHttp(port: number, path: string, server: ChildProcess, timeoutMs = 20000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (server.exitCode !== null || server.signalCode !== null) throw new BenchError(`the server for port ${port} exited (${server.signalCode ?? `status ${server.exitCode}`}) before it answered; its output is above`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}${path}`);
      if (res.status < 500) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new BenchError(`the server on port ${port} did not answer ${path} within ${timeoutMs / 1000} s`);
}

export function stopProcess(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 5000).unref();
  });
}

/**
 * Runs a load generator to completion and returns what it printed on stdout (its JSON result).
 * If `server` exits first, the generator is stopped and the run fails: its figures would be of connection errors.
 */
export async function runGenerator(command: [string, string[]], server?: ChildProcess): Promise<string> {
  const generator = spawnChild(command[0], command[1], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  generator.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  let serverExit: string | undefined;
  const onServerExit = (code: number | null, signal: NodeJS.Signals | null) => {
    serverExit = signal ?? `status ${code}`;
    void stopProcess(generator);
  };
  server?.once('exit', onServerExit);
  const code = await new Promise<number>((resolve) => generator.on('exit', (c) => resolve(c ?? 1)));
  server?.off('exit', onServerExit);
  if (serverExit) throw new BenchError(`the server exited (${serverExit}) during the run; its output is above`);
  if (code !== 0) throw new BenchError(`the load generator exited with status ${code}; its output is above`);
  return out;
}

/** The server's counters; empty when it cannot answer (a collapsed server is a result, not a crash of the runner). */
export async function serverStats(port: number): Promise<Record<string, number>> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/perseid/stats`, { signal: AbortSignal.timeout(10000) });
    return (await res.json()) as Record<string, number>;
  } catch (error) {
    process.stderr.write(`could not read the server's stats: ${(error as Error).message}\n`);
    return {};
  }
}

/** The header every result starts with: what ran, where, from which commit. */
export function describeRun(title: string, script: string): { commit: string; command: string; header: string } {
  const commit = spawnSync('git', ['rev-parse', '--short', 'HEAD']).stdout?.toString().trim() || 'unknown';
  const command = `node dist/bench/${script} ${process.argv.slice(2).join(' ')}`.trim();
  const header = [title, `node ${process.version}  commit ${commit}  pinned ${pinned ? 'server core 0, load core 1' : 'no (taskset missing)'}`, `command: ${command}`, ''].join('\n');
  return { commit, command, header };
}

export const fmt = (n: number, digits = 1): string => (Number.isFinite(n) ? n.toFixed(digits) : '-');

/** The generator's JSON report, its command naming the run's temporary directory as `<tmp>` (results are committed). */
export function readReport(file: string): LoadReport {
  const report = JSON.parse(readFileSync(file, 'utf8')) as LoadReport;
  report.command = report.command.split(dirname(file)).join('<tmp>');
  return report;
}
