/**
 * perseid/testing: helpers for an app's own tests. `startApp` runs the app
 * with `perseid start` as its users will (a real process, on a free port,
 * over a fresh embedded store) and says where it listens.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../cli/main.js', import.meta.url));

export interface StartAppOptions {
  /** More `perseid start` flags. */
  args?: string[];
  /** More environment variables for the app. */
  env?: NodeJS.ProcessEnv;
  /** Directory the app runs in (default the current one). */
  cwd?: string;
  /** How long it may take to listen (default 20000 ms). */
  timeoutMs?: number;
}

export interface RunningApp {
  /** Where it listens, e.g. http://127.0.0.1:40123 (pass it to `new DDPClient(url)`). */
  url: string;
  /** What it printed so far. */
  log(): string;
  /** Stops it (SIGINT) and removes its data directory. */
  stop(): Promise<void>;
}

/** Starts `perseid start <app>` on a free port with a new data directory; resolves once it listens. */
export function startApp(app = 'app.js', options: StartAppOptions = {}): Promise<RunningApp> {
  const dataDir = mkdtempSync(join(tmpdir(), 'perseid-app-test-'));
  const child = spawn(process.execPath, [CLI, 'start', app, '--port', '0', '--data-dir', dataDir, ...(options.args ?? [])], {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
    await exited;
    rmSync(dataDir, { recursive: true, force: true });
  };
  return new Promise((resolve, reject) => {
    const fail = (why: string) => {
      clearTimeout(timer);
      void stop().then(() => reject(new Error(`${why}:\n${output}`)));
    };
    const timer = setTimeout(() => fail(`${app} did not start within ${options.timeoutMs ?? 20000} ms`), options.timeoutMs ?? 20000);
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const url = /Perseid is running at (http:\/\/\S+)/.exec(output)?.[1];
      if (!url) return;
      clearTimeout(timer);
      child.off('exit', onExit);
      resolve({ url, log: () => output, stop });
    };
    const onExit = (code: number | null) => fail(`${app} exited (${code}) before it started`);
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', onExit);
  });
}
