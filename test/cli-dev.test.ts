/**
 * `perseid dev`: the app restarts on a save, keeps its embedded data, and
 * connected clients learn of the new version (hot code push): a Node client
 * with `hotCodePush: 'keep'` gets `newVersion` and its subscriptions back, a
 * page in headless Chromium reloads. A save that breaks the app gets one line
 * and the next good save brings it back.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, it } from 'node:test';
import { chromium } from 'playwright-core';
import { DDPClient } from '../src/client/node.js';
import { CLI, eventually, exited } from './processes.js';
import { needs } from './skips.js';
import { freePort } from '../scripts/services/process.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));

function app(greeting: string): string {
  return [
    "import { fileURLToPath } from 'node:url';",
    "import { Collection } from 'perseid';",
    "const Notes = new Collection('notes');",
    'export default function app(server) {',
    "  server.serveStatic(fileURLToPath(new URL('./public/', import.meta.url)));",
    '  server.methods({',
    `    greet: () => '${greeting}',`,
    "    add: (text) => Notes.insertAsync({ text }),",
    '  });',
    "  server.publish('notes', () => Notes.find());",
    '}',
    '',
  ].join('\n');
}

// The script is a file of its own: the default Content-Security-Policy of static files refuses inline scripts.
const PAGE = `<!doctype html><html><body><p id="version">none</p><script type="module" src="/page.js"></script></body></html>`;
const PAGE_SCRIPT = `import { DDPClient } from '/perseid/client.js';
const client = new DDPClient(location.origin);
client.subscribe('notes');
client.on('connected', () => { document.getElementById('version').textContent = 'connected'; });
`;


interface Dev {
  child: ChildProcess;
  url: string;
  log(): string;
  /** Resolves once the dev log has said `pattern` `times` times in all. */
  said(pattern: RegExp, times: number, timeoutMs?: number): Promise<void>;
}

/** `detached`: in a process group of its own, so that whatever it leaves behind can be found and stopped. */
async function startDev(dir: string, detached = false, env: NodeJS.ProcessEnv = {}): Promise<Dev> {
  const port = await freePort();
  const child = spawn(process.execPath, [resolve(CLI), 'dev', 'app.js', '--port', String(port), '--data-dir', 'data'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], detached, env: { ...process.env, ...env } });
  let log = '';
  child.stdout!.on('data', (c: Buffer) => void (log += c.toString()));
  child.stderr!.on('data', (c: Buffer) => void (log += c.toString()));
  const count = (pattern: RegExp) => log.split('\n').filter((line) => pattern.test(line)).length;
  const said = (pattern: RegExp, times: number, timeoutMs = 20000) => eventually(() => count(pattern) >= times, `${pattern} x${times} in:\n${log}`, timeoutMs);
  await said(/Perseid is running at/, 1);
  return { child, url: `http://127.0.0.1:${port}`, log: () => log, said };
}

describe('perseid dev', () => {
  const dirs: string[] = [];
  const children: ChildProcess[] = [];
  after(async () => {
    for (const child of children) {
      child.kill('SIGINT');
      await exited(child);
    }
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  function appDir(): string {
    const dir = mkdtempSync(join(tmpdir(), 'perseid-dev-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'dev-app', type: 'module' }));
    mkdirSync(join(dir, 'node_modules'));
    symlinkSync(resolve('.'), join(dir, 'node_modules', 'perseid'));
    mkdirSync(join(dir, 'public'));
    writeFileSync(join(dir, 'public', 'index.html'), PAGE);
    writeFileSync(join(dir, 'public', 'page.js'), PAGE_SCRIPT);
    writeFileSync(join(dir, 'app.js'), app('hello'));
    return dir;
  }

  it('restarts on a save with the data kept, and tells clients a new version runs', async () => {
    const dir = appDir();
    const dev = await startDev(dir);
    children.push(dev.child);
    const client = new DDPClient(dev.url, { hotCodePush: 'keep' });
    const versions: string[] = [];
    client.on('newVersion', (version) => versions.push(version));
    try {
      await client.subscribe('notes').ready;
      assert.equal(await client.call('greet'), 'hello');
      const id = await client.call<string>('add', 'kept across restarts');

      writeFileSync(join(dir, 'app.js'), app('hello again'));
      await dev.said(/app\.js changed: restarting/, 1);
      await dev.said(/Perseid is running at/, 2);
      await eventually(() => versions.length === 1, 'a newVersion event', 15000);
      assert.equal(await client.call('greet'), 'hello again');
      await eventually(() => client.collection('notes').findOne(id) !== undefined, 'the note back through the resubscription', 10000);

      // A save that breaks the app: one line, the watcher stays; the next good save brings it back.
      writeFileSync(join(dir, 'app.js'), 'export default function app(server) {\n  server.methods({ greet: () => ; });\n}\n');
      await dev.said(/perseid start: syntax error in app\.js:2: /, 1);
      await dev.said(/the app stopped \(exit 1\); waiting for a change/, 1);
      writeFileSync(join(dir, 'app.js'), app('fixed'));
      await dev.said(/Perseid is running at/, 3);
      await eventually(() => versions.length === 2, 'a second newVersion event', 15000);
      assert.equal(await client.call('greet'), 'fixed');
      assert.equal(client.collection('notes').findOne(id)?.text, 'kept across restarts');
    } finally {
      client.disconnect();
    }
    dev.child.kill('SIGINT');
    assert.equal(await exited(dev.child), 0);
    assert.doesNotMatch(dev.log(), /^\s+at /m, 'no stack trace');
  });

  it("does not restart for its own output sent into the app's directory (npm run dev > dev.log)", async () => {
    const dir = appDir();
    const port = await freePort();
    const out = openSync(join(dir, 'dev.log'), 'w');
    const child = spawn(process.execPath, [resolve(CLI), 'dev', 'app.js', '--port', String(port), '--data-dir', 'data'], { cwd: dir, stdio: ['ignore', out, out] });
    closeSync(out);
    children.push(child);
    const log = () => readFileSync(join(dir, 'dev.log'), 'utf8');
    await eventually(() => /Perseid is running at/.test(log()), 'the server running', 20000);
    // Every line written is a change to dev.log: were it watched, each restart's lines would bring another.
    await new Promise((r) => setTimeout(r, 1500));
    assert.doesNotMatch(log(), /changed: restarting/);
    writeFileSync(join(dir, 'app.js'), app('saved'));
    await eventually(() => /app\.js changed: restarting/.test(log()) && log().split('Perseid is running at').length === 3, 'a restart for the save', 20000);
    child.kill('SIGINT');
    assert.equal(await exited(child), 0);
    assert.equal(log().split('changed: restarting').length, 2, log());
  });

  it('watches an app that lives in dist/ (perseid dev dist/app.js), skipping only the folders inside it', async () => {
    const dir = appDir();
    mkdirSync(join(dir, 'dist'));
    writeFileSync(join(dir, 'dist', 'app.js'), app('built'));
    const port = await freePort();
    const child = spawn(process.execPath, [resolve(CLI), 'dev', 'dist/app.js', '--port', String(port), '--data-dir', 'data'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let log = '';
    child.stdout!.on('data', (c: Buffer) => void (log += c.toString()));
    child.stderr!.on('data', (c: Buffer) => void (log += c.toString()));
    await eventually(() => /Perseid is running at/.test(log), `the server running:\n${log}`, 20000);
    mkdirSync(join(dir, 'dist', 'node_modules'));
    writeFileSync(join(dir, 'dist', 'node_modules', 'x.js'), '');
    await new Promise((r) => setTimeout(r, 600));
    assert.doesNotMatch(log, /changed: restarting/, 'a change in dist/node_modules restarted it');
    writeFileSync(join(dir, 'dist', 'app.js'), app('built again'));
    await eventually(() => log.split('Perseid is running at').length === 3, `a restart for the save:\n${log}`, 20000);
    assert.match(log, /dist\/app\.js changed: restarting/);
    child.kill('SIGINT');
    assert.equal(await exited(child), 0);
  });

  it('says when a --watch path does not exist (a misspelt one would watch nothing), and restarts once it does', async () => {
    const dir = appDir();
    const port = await freePort();
    const child = spawn(process.execPath, [resolve(CLI), 'dev', 'app.js', '--port', String(port), '--data-dir', 'data', '--watch', 'app.js', '--watch', 'scr'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let log = '';
    child.stdout!.on('data', (c: Buffer) => void (log += c.toString()));
    child.stderr!.on('data', (c: Buffer) => void (log += c.toString()));
    await eventually(() => /Perseid is running at/.test(log), `the server running:\n${log}`, 20000);
    assert.match(log, /WARN +\[dev\] --watch scr: no such file or directory; a save there restarts the app once it exists$/m);
    assert.doesNotMatch(log, /--watch app\.js:/);
    mkdirSync(join(dir, 'scr'));
    writeFileSync(join(dir, 'scr', 'util.js'), '');
    await eventually(() => log.split('Perseid is running at').length === 3, `a restart for the new file:\n${log}`, 20000);
    child.kill('SIGINT');
    assert.equal(await exited(child), 0);
  });

  /** Kills a server still answering after its dev exited (its pid is in the data directory's LOCK), so a failing test leaves no process. */
  async function killLeftServer(dev: Dev, dir: string): Promise<void> {
    if (!(await fetch(`${dev.url}/health`).then(() => true, () => false))) return;
    const pid = /^pid (\d+)/.exec(readFileSync(join(dir, 'data', 'LOCK'), 'utf8'))?.[1];
    if (pid) process.kill(Number(pid), 'SIGKILL');
  }

  it('stops the server when it gets SIGHUP (its terminal closing), leaving no process on the port', async () => {
    const dir = appDir();
    const dev = await startDev(dir, true);
    try {
      dev.child.kill('SIGHUP');
      assert.equal(await exited(dev.child), 0, dev.log());
      await assert.rejects(fetch(`${dev.url}/health`), 'nothing answers on the port');
    } finally {
      await killLeftServer(dev, dir);
    }
  });

  it('stops the server when dev itself is killed outright (SIGKILL)', async () => {
    const dir = appDir();
    const dev = await startDev(dir, true);
    try {
      dev.child.kill('SIGKILL');
      await exited(dev.child);
      await eventually(() => fetch(`${dev.url}/health`).then(() => false, () => true), 'the server to stop', 5000);
    } finally {
      await killLeftServer(dev, dir);
    }
  });

  it('on a Ctrl-C (SIGINT to its process group) the server stops once and finishes stopping', async () => {
    const dir = appDir();
    // A run in progress makes stopping take a while (running attempts may finish): long enough for a second signal to land.
    writeFileSync(join(dir, 'app.js'), "export default function app(server) {\n  server.jobs.schedule('slow', 1000, async () => {\n    console.log('slow run started');\n    await new Promise((done) => setTimeout(done, 1500));\n  });\n}\n");
    const dev = await startDev(dir, true);
    try {
      await dev.said(/slow run started/, 1, 5000);
      process.kill(-dev.child.pid!, 'SIGINT'); // as a terminal does: to the whole foreground group
      assert.equal(await exited(dev.child), 0, dev.log());
      assert.match(dev.log(), /\[perseid\] stopped/, `the server's last line:\n${dev.log()}`);
    } finally {
      await killLeftServer(dev, dir);
    }
  });

  it('runs one process whatever PERSEID_WORKERS says (it is for perseid start)', async () => {
    const dev = await startDev(appDir(), false, { PERSEID_WORKERS: '2', MONGO_URL: '' });
    children.push(dev.child);
    const client = new DDPClient(dev.url);
    try {
      assert.equal(await client.call('greet'), 'hello');
    } finally {
      client.disconnect();
    }
  });

  it('refuses a port in use at once, as start does, instead of waiting for a save that cannot free it', async () => {
    const dir = appDir();
    const taken = createServer();
    await new Promise<void>((listening) => taken.listen(0, '127.0.0.1', listening));
    try {
      const port = (taken.address() as { port: number }).port;
      // Bounded: a dev that waits for a change is killed, and fails on its status.
      const out = spawnSync(process.execPath, [resolve(CLI), 'dev', 'app.js', '--port', String(port), '--data-dir', 'data'], { cwd: dir, encoding: 'utf8', timeout: 15000 });
      assert.equal(out.status, 1, out.stdout + out.stderr);
      assert.equal(out.stderr, `perseid dev: port ${port} on 127.0.0.1 is already in use (another server?): stop it, or choose another port with --port or PORT\n`);
      assert.equal(existsSync(join(dir, 'data')), false, 'no data directory made');
    } finally {
      taken.close();
    }
  });

  it('reloads an open page in headless Chromium on a save', { skip: CHROMIUM ? false : needs('Chromium', 'apt-get install chromium (or set CHROMIUM_PATH)') }, async () => {
    const dir = appDir();
    const dev = await startDev(dir);
    children.push(dev.child);
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update'] });
    try {
      const page = await browser.newPage();
      await page.goto(dev.url);
      await page.waitForFunction(() => document.getElementById('version')?.textContent === 'connected');
      await page.evaluate(() => ((window as unknown as { marker: number }).marker = 1));
      const loads: number[] = [];
      page.on('load', () => loads.push(Date.now()));
      writeFileSync(join(dir, 'public', 'index.html'), PAGE.replace('<p id="version">', '<h1>changed</h1><p id="version">'));
      await page.waitForSelector('h1', { timeout: 20000 });
      assert.equal(await page.evaluate(() => (window as unknown as { marker?: number }).marker), undefined, 'the page reloaded');
      assert.equal(loads.length, 1, 'once');
    } finally {
      await browser.close();
    }
  });
});
