/** The `perseid` command: help, usage errors, and a real server process started, used, killed and restarted. */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { DDPClient } from '../src/client/node.js';

const CLI = 'dist/src/cli/main.js';
const APP = 'dist/examples/tasks/app.js';

function run(args: string[], env: NodeJS.ProcessEnv = {}) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: { ...process.env, ...env } });
}

/** Starts the tasks app on a free port; resolves with its URL once it says it is running. */
function start(dataDir: string, extra: string[] = []): Promise<{ child: ChildProcess; url: string; log: () => string }> {
  const child = spawn(process.execPath, [CLI, 'start', APP, '--port', '0', '--data-dir', dataDir, ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      log += chunk.toString();
      const match = /Perseid is running at (http:\/\/\S+)/.exec(log);
      if (match) resolve({ child, url: match[1]!, log: () => log });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`exited with ${code}: ${log}`)));
  });
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.once('exit', (code) => resolve(code));
  });
}

describe('perseid CLI', () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'perseid-cli-'));
    dirs.push(dir);
    return dir;
  };
  after(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('prints help for the command and for each subcommand', () => {
    for (const args of [['--help'], ['help'], []]) {
      const out = run(args);
      assert.equal(out.status, 0);
      assert.match(out.stdout, /Usage: perseid <command>/);
      assert.match(out.stdout, /start/);
    }
    for (const args of [['start', '--help'], ['help', 'start']]) {
      const out = run(args);
      assert.equal(out.status, 0);
      assert.match(out.stdout, /Usage: perseid start <app-module>/);
      assert.match(out.stdout, /--port <port>.*env PORT/);
      assert.match(out.stdout, /--data-dir <dir>.*env PERSEID_DATA_DIR/);
    }
  });

  it('exits 2 with a clear message on bad usage', () => {
    const cases: Array<[string[], RegExp]> = [
      [['frobnicate'], /unknown command 'frobnicate'/],
      [['start'], /Missing the app module/],
      [['start', APP, '--port', 'abc'], /--port must be an integer/],
      [['start', APP, '--nope'], /Unknown option '--nope'/],
      [['start', APP, '--compression', 'lots'], /--compression must be a byte count or off/],
      [['start', APP, '--log-level', 'loud'], /--log-level must be one of/],
    ];
    for (const [args, message] of cases) {
      const out = run(args);
      assert.equal(out.status, 2, args.join(' '));
      assert.match(out.stderr, message);
    }
  });

  it('takes PORT from the environment, serves health, and stops cleanly on SIGTERM', async () => {
    const dir = tempDir();
    const server = await start(dir);
    const health = (await (await fetch(`${server.url}/health`)).json()) as { status: string };
    assert.equal(health.status, 'ok');
    server.child.kill('SIGTERM');
    assert.equal(await exited(server.child), 0);
    const refused = run(['start', APP, '--data-dir', dir], { PORT: 'x' });
    assert.equal(refused.status, 2);
    assert.match(refused.stderr, /--port must be an integer/);
  });

  it('refuses a second server on the same data directory', async () => {
    const dir = tempDir();
    const first = await start(dir);
    const second = spawnSync(process.execPath, [CLI, 'start', APP, '--port', '0', '--data-dir', dir], { encoding: 'utf8', timeout: 10000 });
    assert.notEqual(second.status, 0);
    assert.match(second.stderr, /in use by process \d+/);
    first.child.kill('SIGTERM');
    await exited(first.child);
  });

  it('keeps every acknowledged insert through kill -9 and a restart', async () => {
    const dir = tempDir();
    const first = await start(dir);
    const client = new DDPClient(first.url, { autoReconnect: false });
    const acknowledged: string[] = [];
    let stop = false;
    const writers = [1, 2, 3, 4].map(async (w) => {
      for (let i = 0; !stop; i++) {
        try {
          acknowledged.push(await client.call<string>('insertTask', { description: `w${w} #${i}`, sessionId: `writer-${w}` }));
        } catch {
          return;
        }
      }
    });
    while (acknowledged.length < 300) await new Promise((r) => setTimeout(r, 10));
    first.child.kill('SIGKILL');
    await exited(first.child);
    stop = true;
    await Promise.all(writers);
    client.disconnect();

    const second = await start(dir);
    const reader = new DDPClient(second.url);
    try {
      const stored = new Set((await reader.call<Array<{ _id: string }>>('fetchTasks')).map((t) => t._id));
      const missing = acknowledged.filter((id) => !stored.has(id));
      assert.deepEqual(missing, [], `${missing.length} of ${acknowledged.length} acknowledged inserts lost`);
    } finally {
      reader.disconnect();
      second.child.kill('SIGTERM');
      await exited(second.child);
    }
  });
});
