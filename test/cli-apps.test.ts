/**
 * `perseid start` with apps of every kind (ESM, CommonJS, TypeScript), its
 * flags (the nearest one suggested, --version, --help everywhere), and its
 * shutdown: SIGTERM drains with /health at 503 and ends as soon as the last
 * client has gone.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, describe, it } from 'node:test';
import { Collection } from '../src/collections/collection.js';
import { openDatabase } from '../src/collections/database.js';
import { DDPClient } from '../src/client/node.js';
import { appDir, assertOneLine, OK_APP, perseid, REPO, removeAppDirs } from './cli-app-dir.js';
import { CLI, eventually, exited, startPerseid } from './processes.js';

after(removeAppDirs);

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

  it('runs a TypeScript app as written, imports of .ts files, enums and parameter properties included', async () => {
    // What tsc accepts, on every Node: Node 24's own type stripping finds no greeting.ts from "./greeting.js" and refuses the rest.
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
      'greeting.ts': [
        'enum Language { TypeScript = "ts" }',
        'class Greeter { constructor(private readonly language: Language) {} say(n: number): string { return `${this.language} ${n}`; } }',
        'export function greeting(n: number): string {',
        '  return new Greeter(Language.TypeScript).say(n);',
        '}',
        '',
      ].join('\n'),
    });
    assert.equal(await helloFrom(dir, 'app.ts'), 'ts 0');
    const broken = appDir({ 'app.ts': 'export default function app(server: PerseidServer) {\n  const x: number = ;\n}\n' });
    assertOneLine(perseid(broken, ['start', 'app.ts']), /syntax error in .*app\.ts:2:\d+/);
  });

  it("runs the repository's TypeScript example on the database it opened, not a second copy of perseid", async () => {
    // The repository's tsconfig once mapped `perseid` to src/ for type checks; tsx honours such mappings, so the
    // example's collections lived in a second module instance, in ./.perseid/data whatever --data-dir said.
    // tsx reads the tsconfig of the working directory: this one is the repository's.
    const cwd = appDir({ 'tsconfig.json': JSON.stringify({ extends: join(REPO, 'tsconfig.json') }) });
    const data = join(cwd, 'data');
    const child = spawn(process.execPath, [resolve(CLI), 'start', join(REPO, 'examples/tasks/app.ts'), '--port', '0', '--data-dir', data], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    const url = await new Promise<string>((resolveUrl, reject) => {
      const onData = (chunk: Buffer) => {
        log += chunk.toString();
        const match = /Perseid is running at (http:\/\/\S+)/.exec(log);
        if (match) resolveUrl(match[1]!);
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      child.on('exit', () => reject(new Error(`exited before it ran:\n${log}`)));
    });
    const client = new DDPClient(url);
    try {
      await client.call('insertTask', { description: 'one store', sessionId: 's' });
    } finally {
      client.disconnect();
      child.kill('SIGTERM');
      await exited(child);
    }
    assert.equal(existsSync(join(cwd, '.perseid')), false, `a second store was opened in the working directory:\n${log}`);
    const database = await openDatabase({ dataDir: data });
    try {
      const tasks = await new Collection<{ description: string }>('taskCollection', { database }).find().fetchAsync();
      assert.deepEqual(tasks.map((t) => t.description), ['one store']);
    } finally {
      await database.close();
    }
  });

  it('refuses, in one line, an app whose `perseid` import is mapped to another copy', () => {
    const paths = { perseid: [join(REPO, 'src/index.ts')] };
    const dir = appDir({
      'tsconfig.json': JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', paths } }),
      'app.ts': 'import { Collection, type PerseidServer } from "perseid";\nnew Collection("notes");\nexport default function app(server: PerseidServer): void {}\n',
    });
    assertOneLine(perseid(dir, ['start', 'app.ts', '--port', '0']), /perseid is loaded twice, from .*dist\/src\/collections\/database\.js and .*src\/collections\/database\.ts: run the app with the perseid it imports/);
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

  it('exits at once, saying so, on a second Ctrl-C while it is stopping', async () => {
    // A run in progress makes stopping take a while (running attempts may finish): long enough for a second Ctrl-C.
    const slowJob = "export default function app(server) {\n  server.jobs.schedule('slow', 1000, async () => {\n    console.log('slow run started');\n    await new Promise((done) => setTimeout(done, 5000));\n  });\n}\n";
    const dir = appDir({ 'app.js': slowJob });
    const server = await startPerseid(join(dir, 'app.js'), ['--port', '0', '--data-dir', join(dir, 'data'), '--log-level', 'info']);
    await eventually(() => /slow run started/.test(server.log()), 'a run to start', 10000);
    server.child.kill('SIGINT');
    await eventually(() => /stopping signal=SIGINT/.test(server.log()), 'the server to start stopping');
    server.child.kill('SIGINT');
    assert.equal(await exited(server.child), 1, server.log());
    assert.match(server.log(), /second signal: exiting now/);
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
    const child = spawn(process.execPath, [resolve(CLI), 'start', 'app.js', '--port', '0', '--data-dir', 'data'], { cwd: dir, stdio: 'ignore' });
    child.kill('SIGKILL');
    await exited(child);
    const again = await startPerseid(join(dir, 'app.js'), ['--port', '0', '--data-dir', join(dir, 'data')]);
    assert.equal(await again.stop('SIGINT'), 0);
  });
});
