/**
 * The benchmark programs as a stranger runs them: the suite, at its shortest
 * (one S3 case against the fast baseline, once), on a port of the test's own.
 * A Ctrl-C, a port already taken and a server that dies must each end the
 * program in seconds, in one line, with none of its processes or folders left.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

/** Pids of live processes whose command line contains `text`. */
function processesWith(text: string): number[] {
  return execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.includes(text) && !line.includes('ps -eo'))
    .map((line) => Number(line.trim().split(/\s+/)[0]));
}

async function freePort(): Promise<number> {
  const probe = createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

const suiteFolders = () => readdirSync(tmpdir()).filter((name) => name.startsWith('perseid-suite-'));

interface Suite {
  child: ChildProcess;
  stderr: () => string;
  exit: Promise<[number | null, NodeJS.Signals | null]>;
}

function startSuite(port: number, out: string): Suite {
  const child = spawn(process.execPath, ['dist/bench/suite.js', '--cases', 's3-20kb', '--targets', 'fast', '--runs', '1', '--port', String(port), '--out', out], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return { child, stderr: () => stderr, exit: once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]> };
}

/** Resolves once `check` holds, polling; fails after `ms`. */
async function eventually(what: string, check: () => boolean, ms = 15000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function ended(suite: Suite, ms: number): Promise<[number | null, NodeJS.Signals | null] | 'still running'> {
  return Promise.race([suite.exit, new Promise<'still running'>((resolve) => setTimeout(resolve, ms, 'still running'))]);
}

describe('the benchmark programs\' help', () => {
  it('says what each needs: the built repository, two cores and taskset, its database if any, its ports', () => {
    for (const program of ['suite', 's4', 's5', 's6', 'many-queries', 'apm-overhead']) {
      const help = execFileSync(process.execPath, [`dist/bench/${program}.js`, '--help'], { encoding: 'utf8' });
      assert.match(help, /^Needs: the repository built \(npm install\), run from its root; two cores and taskset \(util-linux\)/m, program);
      assert.match(help, /Ports from (--port|\d+) up must be free\.$/m, program);
    }
    // many-queries' load side, run by it: its help points there, and a wrong flag is one line and the usage, no stack.
    assert.match(execFileSync(process.execPath, ['dist/bench/many-queries-load.js', '--help'], { encoding: 'utf8' }), /run that one instead/);
    const wrong = spawnSync(process.execPath, ['dist/bench/many-queries-load.js', '--rates', '5'], { encoding: 'utf8' });
    assert.equal(wrong.status, 2);
    assert.match(wrong.stderr, /^many-queries-load: Unknown option '--rates'/);
    assert.doesNotMatch(wrong.stderr, /\n\s+at /);
  });
});

describe('the benchmark suite program', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'perseid-bench-programs-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('stops its server and load generator on Ctrl-C, and removes its folders', async () => {
    const port = await freePort();
    const folders = suiteFolders();
    const suite = startSuite(port, join(dir, 'interrupted.json'));
    const marker = `127.0.0.1:${port} `;
    try {
      // The generator runs (it names the server's URL) against the server the suite started.
      await eventually('the load generator', () => processesWith(marker).length > 0);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      suite.child.kill('SIGINT');
      assert.deepEqual(await ended(suite, 15000), [130, null], suite.stderr());
      await eventually('no process of the run', () => processesWith(marker).length === 0 && processesWith(`baseline-server.js --port ${port} `).length === 0, 3000).catch(() => undefined);
      assert.deepEqual([...processesWith(marker), ...processesWith(`baseline-server.js --port ${port} `)], [], 'the server and the generator are stopped');
      assert.deepEqual(suiteFolders(), folders, 'the server\'s data folder is removed');
    } finally {
      suite.child.kill('SIGKILL');
      for (const pid of [...processesWith(marker), ...processesWith(`baseline-server.js --port ${port} `)]) process.kill(pid, 'SIGKILL');
    }
  });

  it('refuses in one line a port something already listens on', async () => {
    const other = createServer((socket) => socket.end('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n')).listen(0, '127.0.0.1');
    await once(other, 'listening');
    const { port } = other.address() as AddressInfo;
    const suite = startSuite(port, join(dir, 'taken.json'));
    try {
      assert.deepEqual(await ended(suite, 10000), [1, null], suite.stderr());
      assert.match(suite.stderr(), new RegExp(`^suite\\.js: port ${port} is taken: stop what listens there, or run where the ports this program uses are free\\n$`, 'm'));
      assert.doesNotMatch(suite.stderr(), /\n\s+at /, 'no stack trace');
      assert.deepEqual(processesWith(`127.0.0.1:${port} `), [], 'no generator was started against the other server');
    } finally {
      suite.child.kill('SIGKILL');
      other.close();
    }
  });

  it('ends in one line when the server it started dies during the run, the generator stopped with it', async () => {
    const port = await freePort();
    const suite = startSuite(port, join(dir, 'died.json'));
    const marker = `127.0.0.1:${port} `;
    try {
      await eventually('the load generator', () => processesWith(marker).length > 0);
      const [server] = processesWith(`baseline-server.js --port ${port} `);
      assert.ok(server, 'the server process');
      process.kill(server, 'SIGKILL');
      assert.deepEqual(await ended(suite, 15000), [1, null], suite.stderr());
      assert.match(suite.stderr(), /^suite\.js: the server exited \(SIGKILL\) during the run; its output is above$/m);
      assert.doesNotMatch(suite.stderr(), /\n\s+at /, 'no stack trace');
      assert.deepEqual(processesWith(marker), [], 'the generator is stopped');
    } finally {
      suite.child.kill('SIGKILL');
      for (const pid of [...processesWith(marker), ...processesWith(`baseline-server.js --port ${port} `)]) process.kill(pid, 'SIGKILL');
    }
  });
});
