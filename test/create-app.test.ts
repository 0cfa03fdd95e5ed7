/**
 * From nothing to a running app, as a stranger would do it: Perseid packed
 * with `npm pack`, an app made from the tarball (`npm create perseid` through
 * the create-perseid tarball, and `perseid create` for the other templates),
 * `npm install` there, then the app's own commands: `npm start` until it
 * answers, and `npm test`. Also what the tarball holds, and the README's own
 * way of adding Perseid to an app of one's own.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DDPClient } from '../src/client/node.js';
import { fencedBlocks } from './docs-blocks.js';

const REPO = resolve('.');
const NPM_FLAGS = ['--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'];

/** This process's environment, less what makes a nested `node --test` report to this runner instead of printing. */
function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  delete env.NODE_TEST_CONTEXT;
  return env;
}

function npm(cwd: string, args: string[]): string {
  const out = spawnSync('npm', args, { cwd, encoding: 'utf8', timeout: 180000, env: cleanEnv() });
  assert.equal(out.status, 0, `npm ${args.join(' ')} failed:\n${out.stdout}\n${out.stderr}`);
  return out.stdout;
}

/** `npm pack` without its lifecycle scripts: `prepare` would rebuild dist/ under the other suites' feet. */
function pack(dir: string, into: string): string {
  const name = npm(dir, ['pack', '--ignore-scripts', '--pack-destination', into, '--loglevel=error']).trim().split('\n').pop()!;
  return join(into, name);
}

/** Runs `npm start` with PORT=0 until it says where it listens; resolves with the URL and a stop(). */
function npmStart(cwd: string): Promise<{ url: string; stop(): Promise<void> }> {
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

describe('a new app from the packed tarball', () => {
  let work: string;
  let tarball: string;
  let createTarball: string;

  before(() => {
    work = mkdtempSync(join(tmpdir(), 'perseid-create-'));
    tarball = pack(REPO, work);
    createTarball = pack(join(REPO, 'packages', 'create-perseid'), work);
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('holds the built files, types, templates and browser client, and nothing else', () => {
    const files = execFileSync('tar', ['tzf', tarball], { encoding: 'utf8' }).trim().split('\n');
    const outside = files.filter((f) => !/^package\/(dist\/src\/|dist\/browser\/|templates\/|package\.json$|README\.md$)/.test(f));
    assert.deepEqual(outside, []);
    for (const wanted of ['dist/src/index.js', 'dist/src/index.d.ts', 'dist/src/client/index.d.ts', 'dist/src/testing/index.js', 'dist/browser/perseid-client.js', 'dist/src/cli/main.js', 'templates/tasks/app.js']) {
      assert.ok(files.includes(`package/${wanted}`), wanted);
    }
    assert.deepEqual(files.filter((f) => /\.map$|\.tsbuildinfo$|\/test\/.*\.test\.js$/.test(f) && !f.startsWith('package/templates/')), []);
  });

  it('npm create perseid (from the tarballs) makes an app whose npm start and npm test work', async () => {
    npm(work, ['exec', '--yes', ...NPM_FLAGS, `--package=${createTarball}`, `--package=${tarball}`, '--', 'create-perseid', 'tasks-app', '--template', 'tasks', '--perseid', tarball]);
    const app = join(work, 'tasks-app');
    const pkg = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as { type: string; scripts: Record<string, string>; dependencies: Record<string, string> };
    assert.equal(pkg.type, 'module');
    assert.deepEqual(Object.keys(pkg.scripts).sort(), ['dev', 'start', 'test']);
    assert.equal(pkg.dependencies.perseid, `file:${tarball}`);
    // No build step here: the tarball's prepare script must not run (it would need TypeScript).
    npm(app, ['install', ...NPM_FLAGS]);

    const server = await npmStart(app);
    try {
      const page = await fetch(server.url);
      assert.equal(page.status, 200);
      assert.match(await page.text(), /<script type="module" src="\/main.js">/);
      assert.equal((await fetch(`${server.url}/perseid/client.js`)).status, 200);
      const client = new DDPClient(server.url);
      try {
        await client.subscribe('tasks').ready;
        const id = await client.call<string>('addTask', 'from the test');
        assert.equal(client.collection('tasks').findOne(id)?.text, 'from the test');
      } finally {
        client.disconnect();
      }
    } finally {
      await server.stop();
    }
    assert.match(npm(app, ['test']), /# pass 2\n# fail 0/);
  });

  it('perseid create makes the minimal and chat apps, whose own tests pass', () => {
    const installed = join(work, 'tasks-app', 'node_modules');
    for (const template of ['minimal', 'chat']) {
      const app = join(work, `${template}-app`);
      const out = spawnSync(process.execPath, [join(installed, 'perseid', 'dist', 'src', 'cli', 'main.js'), 'create', app, '--template', template, '--perseid', tarball], { encoding: 'utf8' });
      assert.equal(out.status, 0, out.stderr);
      assert.match(out.stdout, new RegExp(`Created ${template}-app .* from the ${template} template`));
      symlinkSync(installed, join(app, 'node_modules')); // the same dependencies, installed once
      assert.match(npm(app, ['test']), /# pass 2\n# fail 0/, template);
    }
    const again = spawnSync(process.execPath, [join(installed, 'perseid', 'dist', 'src', 'cli', 'main.js'), 'create', join(work, 'chat-app')], { encoding: 'utf8' });
    assert.equal(again.status, 1);
    assert.match(again.stderr, /chat-app already exists and is not an empty directory: choose a new name/);
  });

  it('the README\'s way into an app of one\'s own: npm init, type module, install, its 20-line app', async () => {
    const app = join(work, 'own-app');
    mkdirSync(app);
    npm(app, ['init', '-y']);
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    const steps = fencedBlocks(readme, 'sh').find((block) => block.includes('npm init -y'));
    assert.ok(steps, 'the README shows how to add Perseid to an app');
    assert.match(steps, /npm pkg set type=module/);
    npm(app, ['pkg', 'set', 'type=module']);
    npm(app, ['install', ...NPM_FLAGS, tarball]);
    const sample = fencedBlocks(readme, 'js').find((block) => block.startsWith('// app.js'));
    assert.ok(sample, 'the README\'s app.js');
    writeFileSync(join(app, 'app.js'), sample);
    const server = spawn(join(app, 'node_modules', '.bin', 'perseid'), ['start', 'app.js', '--port', '0'], { cwd: app, stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    const url = await new Promise<string>((resolveUrl, reject) => {
      const read = (chunk: Buffer) => {
        log += chunk.toString();
        const found = /Perseid is running at (http:\/\/\S+)/.exec(log)?.[1];
        if (found) resolveUrl(found);
      };
      server.stdout.on('data', read);
      server.stderr.on('data', read);
      server.once('exit', (code) => reject(new Error(`exited ${code}: ${log}`)));
    });
    const client = new DDPClient(url);
    try {
      await client.subscribe('room', 'lobby').ready;
      const id = await client.call<string>('send', 'lobby', 'hello');
      assert.equal(client.collection('messages').findOne(id)?.text, 'hello');
      await assert.rejects(client.call('send', 'lobby', ''), { error: 400 });
    } finally {
      client.disconnect();
      server.kill('SIGINT');
    }
  });
});
