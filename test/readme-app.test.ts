/**
 * The README's way into an app of one's own, followed as written: `npm init -y`
 * (which makes a CommonJS package), `npm pkg set type=module`, `npm install` of
 * the packed tarball, the README's 20-line app.js, `npx perseid start app.js`.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DDPClient } from '../src/client/node.js';
import { fencedBlocks } from './docs-blocks.js';
import { NPM_FLAGS, npm, pack, REPO } from './npm.js';

describe('the README\'s app, in an app of one\'s own', () => {
  let work: string;
  let tarball: string;

  before(() => {
    work = mkdtempSync(join(tmpdir(), 'perseid-readme-'));
    tarball = pack(REPO, work);
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('npm init, type module, install, its 20-line app', async () => {
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
