/** What the CLI start-up suites share: an app directory with perseid installed as npm would, and the CLI run in it. */
import assert from 'node:assert/strict';
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CLI } from './processes.js';

export const REPO = resolve('.');
const cli = resolve(CLI);
const dirs: string[] = [];

/** A directory holding an app: files by name, and perseid installed the way npm would (node_modules/perseid); `type` null leaves package.json without one. */
export function appDir(files: Record<string, string>, type: 'module' | 'commonjs' | null = 'module'): string {
  const dir = mkdtempSync(join(tmpdir(), 'perseid-startup-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'app', ...(type ? { type } : {}) }));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(REPO, join(dir, 'node_modules', 'perseid'));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

/** Removes the app directories made so far. */
export function removeAppDirs(): void {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

export function perseid(cwd: string, args: string[], env: NodeJS.ProcessEnv = {}, options: SpawnSyncOptions = {}) {
  const out = spawnSync(process.execPath, [cli, ...args], { cwd, encoding: 'utf8', timeout: 30000, env: { ...process.env, PERSEID_LOG_LEVEL: 'warn', ...env }, ...options });
  return { status: out.status, stderr: String(out.stderr), stdout: String(out.stdout) };
}

/** Every line assertOneLine has passed, for checking the docs' table of them. */
export const oneLiners: string[] = [];

/** Exit 1 with exactly one line on stderr, matching `message`, and no stack frame anywhere. */
export function assertOneLine(out: { status: number | null; stderr: string }, message: RegExp): void {
  assert.equal(out.status, 1, out.stderr);
  const lines = out.stderr.trim().split('\n');
  assert.equal(lines.length, 1, `one line, got:\n${out.stderr}`);
  assert.match(lines[0]!, /^perseid start: /);
  assert.match(lines[0]!, message);
  assert.doesNotMatch(out.stderr, /^\s+at /m);
  oneLiners.push(lines[0]!);
}

/**
 * The messages docs/getting-started.md's "When it does not start" table shows,
 * as patterns: each `code span` of its first column, `...` standing for any
 * text and a number for any number.
 */
export function documentedStartupErrors(): RegExp[] {
  const page = readFileSync(new URL('../../docs/getting-started.md', import.meta.url), 'utf8');
  const section = page.slice(page.indexOf('## When it does not start'));
  const rows = section.split('\n').filter((line) => line.startsWith('| `'));
  return rows.flatMap((row) =>
    [...row.split('|')[1]!.matchAll(/`([^`]+)`/g)].map(
      ([, text]) => new RegExp(text!.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replaceAll('\\.\\.\\.', '.*').replace(/\d+/g, '\\d+')),
    ),
  );
}

export const OK_APP = 'export default function app(server) { server.methods({ hello: () => "hi" }); }\n';
