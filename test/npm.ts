/** npm as a stranger runs it, for the suites that pack Perseid and install it into new apps. */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';

export const REPO = resolve('.');
export const NPM_FLAGS = ['--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'];

/** This process's environment, less what makes a nested `node --test` report to this runner instead of printing. */
function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  delete env.NODE_TEST_CONTEXT;
  return env;
}

export function npm(cwd: string, args: string[]): string {
  const out = spawnSync('npm', args, { cwd, encoding: 'utf8', timeout: 180000, env: cleanEnv() });
  assert.equal(out.status, 0, `npm ${args.join(' ')} failed:\n${out.stdout}\n${out.stderr}`);
  return out.stdout;
}

/** `npm pack` without its lifecycle scripts: `prepare` would rebuild dist/ under the other suites' feet. */
export function pack(dir: string, into: string): string {
  const name = npm(dir, ['pack', '--ignore-scripts', '--pack-destination', into, '--loglevel=error']).trim().split('\n').pop()!;
  return join(into, name);
}

/** Runs `npm start` with PORT=0 until it says where it listens; resolves with the URL and a stop(). */
export function npmStart(cwd: string): Promise<{ url: string; stop(): Promise<void> }> {
  // Its own process group: npm, the shell and the server stop together.
  const child = spawn('npm', ['start'], { cwd, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: cleanEnv({ PORT: '0' }) });
  let log = '';
  return new Promise((resolveStart, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm start did not answer within 30 s:\n${log}`)), 30000);
    const read = (chunk: Buffer) => {
      log += chunk.toString();
      const url = /Perseid is running at (http:\/\/\S+)/.exec(log)?.[1];
      if (!url) return;
      clearTimeout(timer);
      resolveStart({
        url,
        stop: () =>
          new Promise<void>((done) => {
            child.once('exit', () => done());
            process.kill(-child.pid!, 'SIGINT');
          }),
      });
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`npm start exited (${code}):\n${log}`));
    });
  });
}
