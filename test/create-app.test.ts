/**
 * From nothing to a running app, as a stranger would do it: Perseid packed
 * with `npm pack`, an app made from the tarball (`npm create perseid` through
 * the create-perseid tarball, and `perseid create` for the other templates),
 * `npm install` there, then the app's own commands: `npm start` until it
 * answers, and `npm test`. Also what the tarball holds. (readme-app.test.ts
 * follows the README's way into an app of one's own.)
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DDPClient } from '../src/client/node.js';

import { NPM_FLAGS, npm, npmStart, pack, REPO } from './npm.js';

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
});
