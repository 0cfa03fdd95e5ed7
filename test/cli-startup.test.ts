/**
 * `perseid start` as a newcomer meets it: each start-up mistake gets one line
 * that names the thing and what to do, a non-zero exit and no stack trace,
 * and leaves no data directory behind; apps in ESM, CommonJS and TypeScript
 * start; flags are checked with the nearest one suggested; SIGTERM drains
 * with /health at 503 and ends as soon as the last client has gone.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, it } from 'node:test';
import { DDPClient } from '../src/client/node.js';
import { CLI, exited, startPerseid } from './processes.js';

const REPO = resolve('.');
const cli = resolve(CLI);
const dirs: string[] = [];

/** A directory holding an app: files by name, and perseid installed the way npm would (node_modules/perseid). */
function appDir(files: Record<string, string>, type: 'module' | 'commonjs' = 'module'): string {
  const dir = mkdtempSync(join(tmpdir(), 'perseid-startup-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'app', type }));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(REPO, join(dir, 'node_modules', 'perseid'));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

function perseid(cwd: string, args: string[], env: NodeJS.ProcessEnv = {}, options: SpawnSyncOptions = {}) {
  const out = spawnSync(process.execPath, [cli, ...args], { cwd, encoding: 'utf8', timeout: 30000, env: { ...process.env, PERSEID_LOG_LEVEL: 'warn', ...env }, ...options });
  return { status: out.status, stderr: String(out.stderr), stdout: String(out.stdout) };
}

/** Exit 1 with exactly one line on stderr, matching `message`, and no stack frame anywhere. */
function assertOneLine(out: { status: number | null; stderr: string }, message: RegExp): void {
  assert.equal(out.status, 1, out.stderr);
  const lines = out.stderr.trim().split('\n');
  assert.equal(lines.length, 1, `one line, got:\n${out.stderr}`);
  assert.match(lines[0]!, /^perseid start: /);
  assert.match(lines[0]!, message);
  assert.doesNotMatch(out.stderr, /^\s+at /m);
}

const OK_APP = 'export default function app(server) { server.methods({ hello: () => "hi" }); }\n';

describe('perseid start: start-up errors', () => {
  after(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('names a missing app file, and makes nothing', () => {
    const dir = appDir({});
    assertOneLine(perseid(dir, ['start', 'app.js']), /app module app\.js not found .*perseid start app\.js/);
    assert.equal(existsSync(join(dir, '.perseid')), false, 'no data directory');
  });

  it('gives the file and line of a syntax error, in the app or in a file it imports, and makes nothing', () => {
    const dir = appDir({
      'app.js': 'export default function app(server) {\n  server.methods({ a() { return 1 }; });\n}\n',
      'main.js': 'import { helper } from "./lib/helper.js";\nexport default function () { helper(); }\n',
      'lib/helper.js': 'export function helper() {}\nexport const broken = ;\n',
    });
    assertOneLine(perseid(dir, ['start', 'app.js']), /syntax error in app\.js:2: Unexpected token/);
    assertOneLine(perseid(dir, ['start', 'main.js']), /syntax error in lib\/helper\.js:2: Unexpected token/);
    assert.equal(existsSync(join(dir, '.perseid')), false, 'no data directory');
  });

  it('says where an app threw while loading or setting up', () => {
    const dir = appDir({
      'loading.js': 'const ready = false;\nif (!ready) throw new Error("config missing");\nexport default function () {}\n',
      'setup.js': 'export default function app(server) {\n  server.methods({ notAFunction: 42 });\n}\n',
      'none.js': 'export const app = () => {};\n',
    });
    assertOneLine(perseid(dir, ['start', 'loading.js']), /loading\.js failed while loading: config missing \(at loading\.js:2:\d+\)/);
    assert.equal(existsSync(join(dir, '.perseid')), false, 'no data directory after a failed load');
    assertOneLine(perseid(dir, ['start', 'setup.js']), /setup\.js failed while setting up the server: Method 'notAFunction' must be a function \(at setup\.js:2:\d+\)/);
    assertOneLine(perseid(dir, ['start', 'none.js']), /none\.js has no default export: end it with export default function app\(server\)/);
  });

  it('says what to change when the module format is the wrong one', () => {
    const esmInCjs = appDir({ 'app.js': 'import { Collection } from "perseid";\nexport default function () {}\n' }, 'commonjs');
    assertOneLine(perseid(esmInCjs, ['start', 'app.js']), /app\.js uses import\/export but Node loads it as CommonJS: add "type": "module" to package\.json \(or rename it to app\.mjs\)/);
    const cjsInEsm = appDir({ 'app.js': 'const { Collection } = require("perseid");\nmodule.exports = function () {};\n' });
    assertOneLine(perseid(cjsInEsm, ['start', 'app.js']), /app\.js:1:\d+ uses require but Node loads it as an ES module .*rename it to app\.cjs/);
  });

  it('reports a port in use and an address not of this machine before making the data directory', async () => {
    const dir = appDir({ 'app.js': OK_APP });
    const holder = createServer();
    await new Promise<void>((r) => holder.listen(0, '127.0.0.1', () => r()));
    const { port } = holder.address() as { port: number };
    try {
      assertOneLine(perseid(dir, ['start', 'app.js', '--port', String(port)]), new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use .*--port or PORT`));
    } finally {
      holder.close();
    }
    // 192.0.2.1 is TEST-NET-1: never an address of this machine. Binding sends nothing.
    assertOneLine(perseid(dir, ['start', 'app.js', '--host', '192.0.2.1', '--port', '0']), /192\.0\.2\.1 is not an address of this machine: use 127\.0\.0\.1, 0\.0\.0\.0/);
    assert.equal(existsSync(join(dir, '.perseid')), false, 'no data directory');
  });

  it('refuses a data directory that is a file or cannot be written, naming it', () => {
    const dir = appDir({ 'app.js': OK_APP, 'data.txt': 'not a directory' });
    assertOneLine(perseid(dir, ['start', 'app.js', '--port', '0', '--data-dir', 'data.txt']), /the data directory data\.txt is a file, not a directory: remove it, or choose another with --data-dir/);
    assertOneLine(perseid(dir, ['start', 'app.js', '--port', '0', '--data-dir', 'data.txt/inside']), /the data directory data\.txt\/inside cannot be created: .*data\.txt is a file/);

    // Root may write anywhere: the not-writable case then runs as nobody.
    const readOnly = join(dir, 'read-only');
    mkdirSync(readOnly);
    chmodSync(dir, 0o755);
    chmodSync(readOnly, 0o555);
    const asNobody = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
    assertOneLine(
      perseid(dir, ['start', 'app.js', '--port', '0', '--data-dir', 'read-only'], {}, asNobody),
      /the data directory read-only is not writable by this user: fix its permissions, or choose another/,
    );
    assertOneLine(
      perseid(dir, ['start', 'app.js', '--port', '0', '--data-dir', 'read-only/data'], {}, asNobody),
      /the data directory read-only\/data cannot be created: .*read-only is not writable by this user/,
    );
  });

  it('names the process that holds the data directory, with no stack after the message', async () => {
    const dir = appDir({ 'app.js': OK_APP });
    const data = join(dir, 'data');
    const first = await startPerseid(join(dir, 'app.js'), ['--port', '0', '--data-dir', data]);
    try {
      assertOneLine(
        perseid(dir, ['start', 'app.js', '--port', '0', '--data-dir', data]),
        new RegExp(`the data directory .*data is in use by process ${first.child.pid} \\(another perseid start\\?\\): stop it, or choose another with --data-dir`),
      );
    } finally {
      await first.stop('SIGINT');
    }
  });

  it('gives up on an unreachable Redis within the bound, saying why', () => {
    const dir = appDir({ 'app.js': OK_APP });
    const started = Date.now();
    const out = perseid(dir, ['start', 'app.js', '--port', '0', '--fanout', 'redis'], {
      REDIS_URL: 'redis://127.0.0.1:1',
      MONGO_URL: 'mongodb://127.0.0.1:1/x',
      PERSEID_CONNECT_TIMEOUT_MS: '1500',
    });
    assertOneLine(out, /cannot reach Redis at redis:\/\/127\.0\.0\.1:1\/? within 1500 ms \(connect ECONNREFUSED 127\.0\.0\.1:1\): start it, or fix REDIS_URL/);
    assert.ok(Date.now() - started < 15000, 'bounded');
  });
});

describe('perseid start: apps of every kind', () => {
  /** Starts the app, calls `hello` over DDP, stops it. */
  async function helloFrom(dir: string, app: string): Promise<unknown> {
    const server = await startPerseid(join(dir, app), ['--port', '0', '--data-dir', join(dir, 'data')]);
    const client = new DDPClient(server.url);
    try {
      return await client.call('hello');
    } finally {
      client.disconnect();
      await server.stop('SIGINT');
    }
  }

  it('starts an ES module app and a CommonJS one', async () => {
    const esm = appDir({ 'app.js': 'import { Collection } from "perseid";\nconst Notes = new Collection("notes");\nexport default function (server) { server.methods({ hello: async () => `esm ${await Notes.find().countAsync()}` }); }\n' });
    assert.equal(await helloFrom(esm, 'app.js'), 'esm 0');
    const cjs = appDir(
      { 'app.js': 'const { Collection } = require("perseid");\nconst Notes = new Collection("notes");\nmodule.exports = function (server) { server.methods({ hello: async () => `cjs ${await Notes.find().countAsync()}` }); };\n' },
      'commonjs',
    );
    assert.equal(await helloFrom(cjs, 'app.js'), 'cjs 0');
  });

  it('runs a TypeScript app as written, imports of .ts files included', async () => {
    const dir = appDir({
      'app.ts': [
        'import { Collection, type PerseidServer } from "perseid";',
        'import { greeting } from "./greeting.js";',
        'interface Note { _id: string; text: string }',
        'const Notes = new Collection<Note>("notes");',
        'export default function app(server: PerseidServer): void {',
        '  server.methods({ hello: async (): Promise<string> => greeting(await Notes.find().countAsync()) });',
        '}',
        '',
      ].join('\n'),
      'greeting.ts': 'export function greeting(n: number): string {\n  return `ts ${n}`;\n}\n',
    });
    assert.equal(await helloFrom(dir, 'app.ts'), 'ts 0');
    const broken = appDir({ 'app.ts': 'export default function app(server: PerseidServer) {\n  const x: number = ;\n}\n' });
    assertOneLine(perseid(broken, ['start', 'app.ts']), /syntax error in .*app\.ts:2:\d+/);
  });
});

describe('perseid start: shutting down', () => {
  it('exits at once on SIGTERM when no client is connected', async () => {
    const dir = appDir({ 'app.js': OK_APP });
    const server = await startPerseid(join(dir, 'app.js'), ['--port', '0', '--data-dir', join(dir, 'data'), '--drain-ms', '60000']);
    const started = Date.now();
    assert.equal(await server.stop('SIGTERM'), 0, server.log());
    assert.ok(Date.now() - started < 10000, `took ${Date.now() - started} ms with a 60 s drain window`);
  });

  it('answers /health with 503 while draining, and exits once the last client has gone', async () => {
    const dir = appDir({ 'app.js': OK_APP });
    const server = await startPerseid(join(dir, 'app.js'), ['--port', '0', '--data-dir', join(dir, 'data'), '--drain-ms', '60000']);
    const clients = [0, 1, 2].map(() => new DDPClient(server.url, { autoReconnect: false }));
    await Promise.all(clients.map((c) => c.connect()));
    server.child.kill('SIGTERM');
    // The first client is closed at once; with 60 s spread over 3 clients, the next waits 20 s.
    const deadline = Date.now() + 10000;
    let health: Response | undefined;
    while (Date.now() < deadline) {
      health = await fetch(`${server.url}/health`);
      if (health.status === 503) break;
      await health.body?.cancel();
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(health?.status, 503);
    assert.equal(((await health!.json()) as { status: string }).status, 'draining');
    // A new DDP connection is turned away while draining.
    const late = new DDPClient(server.url, { autoReconnect: false });
    await assert.rejects(late.connect());
    const started = Date.now();
    for (const client of clients) client.disconnect();
    assert.equal(await exited(server.child), 0);
    assert.ok(Date.now() - started < 10000, `exited ${Date.now() - started} ms after the last client left (window 60 s)`);
  });
});

describe('perseid: flags, help and version', () => {
  it('suggests the nearest flag or command', () => {
    const dir = appDir({ 'app.js': OK_APP });
    const typo = perseid(dir, ['start', 'app.js', '--prot', '4000']);
    assert.equal(typo.status, 2);
    assert.match(typo.stderr, /^perseid start: unknown option --prot \(did you mean --port\?\)/);
    const far = perseid(dir, ['start', 'app.js', '--zzzzzzzz']);
    assert.match(far.stderr, /^perseid start: unknown option --zzzzzzzz\n/);
    const command = perseid(dir, ['strat']);
    assert.equal(command.status, 2);
    assert.match(command.stderr, /unknown command 'strat' \(did you mean start\?\)/);
    assert.match(perseid(dir, ['dev', 'app.js', '--wacth', '.']).stderr, /did you mean --watch\?/);
  });

  it('prints the version and every command\'s help', () => {
    const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    for (const flag of ['--version', '-v']) assert.equal(perseid(REPO, [flag]).stdout.trim(), version);
    for (const command of ['create', 'dev', 'start', 'load']) {
      const out = perseid(REPO, [command, '--help']);
      assert.equal(out.status, 0, command);
      assert.match(out.stdout, new RegExp(`Usage: perseid ${command} `));
    }
  });

  it('ends a process that is killed mid-start without leaving the port taken', async () => {
    const dir = appDir({ 'app.js': OK_APP });
    const child = spawn(process.execPath, [cli, 'start', 'app.js', '--port', '0', '--data-dir', 'data'], { cwd: dir, stdio: 'ignore' });
    child.kill('SIGKILL');
    await exited(child);
    const again = await startPerseid(join(dir, 'app.js'), ['--port', '0', '--data-dir', join(dir, 'data')]);
    assert.equal(await again.stop('SIGINT'), 0);
  });
});
