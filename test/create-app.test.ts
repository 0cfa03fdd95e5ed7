/**
 * From nothing to a running app, as a stranger would do it: Perseid packed
 * with `npm pack`, an app made from the tarball (`npm create perseid` through
 * the create-perseid tarball, and `perseid create` for the other templates),
 * `npm install` there, then the app's own commands: `npm start` until it
 * answers, and `npm test`. Also what the tarball holds, and `perseid create`
 * run from this checkout: the app then depends on it, and the output's `cd`
 * line works pasted into a shell. (readme-app.test.ts follows the README's way
 * into an app of one's own.)
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DDPClient } from '../src/client/node.js';

import { NPM_FLAGS, npm, npmStart, pack, REPO } from './npm.js';
import { CLI } from './processes.js';

/** The app's two tests passed, in node --test's summary: TAP's ('# pass 2') on Node 20, the spec reporter's ('ℹ pass 2') on Node 24. */
const BOTH_PASSED = /[#ℹ] pass 2\n[#ℹ] fail 0/;

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
    assert.match(npm(app, ['test']), BOTH_PASSED);
  });

  it('perseid create makes the minimal and chat apps, whose own tests pass', () => {
    const installed = join(work, 'tasks-app', 'node_modules');
    for (const template of ['minimal', 'chat']) {
      const app = join(work, `${template}-app`);
      const out = spawnSync(process.execPath, [join(installed, 'perseid', 'dist', 'src', 'cli', 'main.js'), 'create', app, '--template', template, '--perseid', tarball], { encoding: 'utf8' });
      assert.equal(out.status, 0, out.stderr);
      assert.match(out.stdout, new RegExp(`Created ${template}-app .* from the ${template} template`));
      symlinkSync(installed, join(app, 'node_modules')); // the same dependencies, installed once
      assert.match(npm(app, ['test']), BOTH_PASSED, template);
    }
    const again = spawnSync(process.execPath, [join(installed, 'perseid', 'dist', 'src', 'cli', 'main.js'), 'create', join(work, 'chat-app')], { encoding: 'utf8' });
    assert.equal(again.status, 1);
    assert.match(again.stderr, /chat-app already exists and is not an empty directory: choose a new name, e\.g\. perseid create \S+chat-app-2\n/);
    // From inside it, the suggestion is a sibling, not `.-2`.
    const here = spawnSync(process.execPath, [join(installed, 'perseid', 'dist', 'src', 'cli', 'main.js'), 'create', '.'], { encoding: 'utf8', cwd: join(work, 'chat-app') });
    assert.equal(here.status, 1);
    assert.match(here.stderr, /^perseid create: \. already exists and is not an empty directory: choose a new name, e\.g\. perseid create \.\.\/chat-app-2\n$/);
  });

  it('npm create perseid without a directory names the app my-perseid-app, options given or not', () => {
    // create-perseid as npm runs it, beside the perseid it depends on (the tasks app's, installed above).
    const bin = join(work, 'create-bin');
    mkdirSync(bin);
    copyFileSync(join(REPO, 'packages', 'create-perseid', 'index.js'), join(bin, 'index.mjs'));
    symlinkSync(join(work, 'tasks-app', 'node_modules'), join(bin, 'node_modules'));
    for (const [name, args] of [['bare', []], ['options', ['--template', 'chat', '--perseid', tarball]]] as const) {
      const cwd = join(work, `default-${name}`);
      mkdirSync(cwd);
      const out = spawnSync(process.execPath, [join(bin, 'index.mjs'), ...args], { cwd, encoding: 'utf8' });
      assert.equal(out.status, 0, out.stderr);
      assert.match(out.stdout, /^Created my-perseid-app in my-perseid-app from the \w+ template\.$/m);
      assert.ok(existsSync(join(cwd, 'my-perseid-app', 'app.js')), name);
    }
  });

  it('perseid create from an installed copy, without --perseid, asks for the version and says it may not be on the registry', () => {
    const cli = join(work, 'tasks-app', 'node_modules', 'perseid', 'dist', 'src', 'cli', 'main.js');
    const out = spawnSync(process.execPath, [cli, 'create', join(work, 'registry-app')], { encoding: 'utf8' });
    assert.equal(out.status, 0, out.stderr);
    const { version } = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string };
    assert.equal(dependencyOf(join(work, 'registry-app')), `^${version}`);
    assert.match(out.stdout, new RegExp(`^perseid \\^${version.replaceAll('.', '\\.')} may not be on the npm registry yet: if npm install cannot find it, make the app with --perseid <tarball\\|path\\|version>\\.$`, 'm'));
  });
});

function dependencyOf(app: string): string | undefined {
  return (JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }).dependencies.perseid;
}

describe('perseid create run from this checkout', () => {
  const work = realpathSync(mkdtempSync(join(tmpdir(), 'perseid-create-checkout-')));
  after(() => rmSync(work, { recursive: true, force: true }));
  const create = (cwd: string, args: string[]) => spawnSync(process.execPath, [resolve(CLI), 'create', ...args], { cwd, encoding: 'utf8' });

  it('says in one line when it cannot make the directory, with no stack trace', () => {
    writeFileSync(join(work, 'notes.txt'), '');
    const out = create(work, ['notes.txt/app']);
    assert.equal(out.status, 1);
    assert.equal(out.stderr, 'perseid create: cannot create notes.txt/app: a file stands in its path: choose a directory you may write in\n');
  });

  it('makes the app depend on the checkout and says so; its npm install and npm test work', () => {
    const out = create(work, ['app', '--template', 'tasks']);
    assert.equal(out.status, 0, out.stderr);
    assert.equal(dependencyOf(join(work, 'app')), `file:${realpathSync(REPO)}`);
    assert.ok(out.stdout.split('\n').includes(`It depends on the Perseid checkout this command ran from (file:${realpathSync(REPO)}); --perseid <tarball|path|version> chooses another.`), out.stdout);
    // The checkout's prepare script (a build) would rewrite dist/ under the other suites' feet.
    npm(join(work, 'app'), ['install', '--ignore-scripts', ...NPM_FLAGS]);
    assert.match(npm(join(work, 'app'), ['test']), BOTH_PASSED);
  });

  it('prints a cd line a POSIX shell takes as it is: absolute if given so, quoted when it must be', () => {
    mkdirSync(join(work, 'here'));
    const cases: Array<[cwd: string, args: string[], cd: string]> = [
      [join(work, 'here'), [join(work, 'abs')], `cd ${join(work, 'abs')}`],
      [join(work, 'here'), ['../rel'], 'cd ../rel'],
      [join(work, 'here'), ["it's a dir"], `cd 'it'\\''s a dir'`],
      [join(work, 'here'), ['--', '-dash'], 'cd ./-dash'],
      [join(work, 'here'), [join(work, 'with space')], `cd '${join(work, 'with space')}'`],
    ];
    for (const [cwd, args, cd] of cases) {
      const out = create(cwd, args);
      assert.equal(out.status, 0, out.stderr);
      const line = out.stdout.split('\n').find((l) => l.startsWith('  cd '))?.trim();
      assert.equal(line, cd);
      const target = resolve(cwd, args.at(-1)!);
      assert.equal(execFileSync('sh', ['-c', `${line} && pwd -P`], { cwd, encoding: 'utf8' }).trim(), target, line);
    }
  });

  it('refuses a --perseid path that is not there, or a directory that is no package, in one line, and makes nothing', () => {
    const missing = create(work, ['none', '--perseid', './does-not-exist.tgz']);
    assert.equal(missing.status, 1);
    assert.equal(missing.stderr, `perseid create: --perseid ./does-not-exist.tgz: there is no ${join(work, 'does-not-exist.tgz')}: give a perseid tarball (npm pack), a checkout of Perseid, or a version\n`);
    const notPackage = create(work, ['none', '--perseid', `file:${tmpdir()}`]);
    assert.equal(notPackage.status, 1);
    assert.match(notPackage.stderr, /^perseid create: --perseid file:\S+: \S+ has no package\.json: give a perseid tarball/);
    assert.equal(existsSync(join(work, 'none')), false);
  });
});
