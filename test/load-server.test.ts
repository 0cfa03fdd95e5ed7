/**
 * `perseid load` and the server's processes: the sampler measures everything
 * under the pid it is given, and `--spawn` runs the server command in a
 * process group of its own, stopped whole at the end: after a run, a failed
 * run, a Ctrl-C, and a server that ignores SIGTERM. The servers are real
 * `perseid start` processes behind a shell wrapper (the server a grandchild,
 * as under `npx`), on loopback.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { freePort, portOpen } from '../scripts/services/process.js';
import { serviceUrl } from '../scripts/services/control.js';
import { ProcessSampler } from '../src/load/process-sampler.js';
import { cpuSeconds } from '../src/load/process-table.js';
import type { LoadReport } from '../src/load/report/model.js';
import { runScenario } from '../src/load/run-scenario.js';
import { SpawnedServer } from '../src/load/spawned-server.js';
import { freshDatabase } from './databases.js';
import { CLI, eventually, exited, startPerseid } from './processes.js';
import { needsServices } from './skips.js';

const mongo = await serviceUrl('mongo-java-server');
const dir = mkdtempSync(join(tmpdir(), 'perseid-load-server-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Live processes whose command line mentions `marker`. */
function processesWith(marker: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(marker)) found.push(Number(entry));
    } catch {
      // ended meanwhile
    }
  }
  return found;
}

/** A `perseid start` of the tasks example behind `sh -c` (which waits for it, so the server is its child). */
async function wrappedServer(name: string): Promise<{ command: string; url: string; port: number; marker: string }> {
  const port = await freePort();
  const marker = join(dir, name);
  return {
    command: `sh -c 'node ${CLI} start dist/examples/tasks/app.js --port ${port} --data-dir ${marker} --log-level warn; echo the wrapper ends'`,
    url: `http://127.0.0.1:${port}`,
    port,
    marker,
  };
}

function load(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, 'load', ...args], { timeout: 60000 }, (error, stdout, stderr) => resolve({ status: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
}

async function assertAllGone(server: { port: number; marker: string }): Promise<void> {
  assert.equal(await portOpen(server.port), false, 'the server port is closed');
  assert.deepEqual(processesWith(server.marker), [], 'no process of the server is left');
}

describe('the server sampler', () => {
  it('measures every process under the pid: an idle parent, and a child that burns CPU, starts after the sampler and ends before it stops', async () => {
    const burn = "const end = Date.now() + 800; while (Date.now() < end);";
    const parent = spawn(process.execPath, ['-e', `setTimeout(() => require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(burn)}]), 300); setInterval(() => {}, 1000);`], { detached: true, stdio: 'ignore' });
    try {
      const sampler = new ProcessSampler(parent.pid!);
      await new Promise((resolve) => setTimeout(resolve, 1800));
      const { cpuSeconds, peakRssMb, processes } = sampler.stop();
      assert.equal(processes, 2);
      // The child's busy 0.8 s (less on a shared machine); the parent alone uses next to nothing.
      assert.ok(cpuSeconds > 0.3, `${cpuSeconds} s CPU`);
      assert.ok(peakRssMb > 50, `peak RSS ${peakRssMb} MB: two node processes`);
      const cpu = sampler.samples.map((s) => s.cpuSeconds);
      assert.deepEqual([...cpu].sort((a, b) => a - b), cpu, 'CPU time never goes back, also when the child ends');
    } finally {
      process.kill(-parent.pid!, 'SIGKILL');
    }
  });
});

describe('perseid load --server-pid of a primary with workers', { skip: needsServices({ 'mongo-java-server': mongo }) }, () => {
  it('counts the workers too', async () => {
    const database = freshDatabase(mongo!);
    const primary = await startPerseid('dist/examples/tasks/app.js', ['--port', '0', '--workers', '2'], { MONGO_URL: database.url });
    try {
      const own = cpuSeconds(primary.child.pid!);
      const report = await runScenario({ url: primary.url, scenario: 's1', phases: [{ duration: 2, arrivalRate: 10 }], params: { tasks: '3' }, serverPid: primary.child.pid! });
      const primaryAlone = cpuSeconds(primary.child.pid!) - own;
      assert.equal(report.users.completed, 20, JSON.stringify(report.errors));
      assert.equal(report.server!.processes, 3);
      // The workers serve the connections: the primary's own CPU is the smaller part.
      assert.ok(report.server!.cpuSeconds > primaryAlone + 0.05, `${report.server!.cpuSeconds} s in all, ${primaryAlone} s the primary's`);
      assert.ok(report.server!.peakRssMb > 90, `peak RSS ${report.server!.peakRssMb} MB`);
    } finally {
      await primary.stop('SIGTERM');
      await database.drop();
    }
  });
});

describe('perseid load --spawn', () => {
  it('samples the real server behind a wrapper, and leaves nothing running after the run', async () => {
    const server = await wrappedServer('after-run');
    const json = join(dir, 'report.json');
    const out = await load(['s1', '--spawn', server.command, '--url', server.url, '--rate', '20', '--duration', '2', '--param', 'tasks=3', '--json', json]);
    assert.equal(out.status, 0, out.stderr);
    const report = JSON.parse(readFileSync(json, 'utf8')) as LoadReport;
    assert.equal(report.users.completed, 40);
    // Before, the wrapper alone was sampled: no CPU, a couple of MB.
    assert.ok(report.server!.processes >= 2, JSON.stringify(report.server));
    assert.ok(report.server!.cpuSeconds > 0.1, `${report.server!.cpuSeconds} s server CPU`);
    assert.ok(report.server!.peakRssMb > 40, `peak RSS ${report.server!.peakRssMb} MB`);
    assert.match(out.stdout, /server {5}pid \d+ \(\d processes\): /);
    await assertAllGone(server);
  });

  it('stops the server when the run fails after starting it', async () => {
    const server = await wrappedServer('failed-run');
    const out = await load(['s1', '--spawn', server.command, '--url', server.url, '--rate', '10', '--duration', '2', '--max-users', '5']);
    assert.equal(out.status, 2);
    assert.match(out.stderr, /more than --max-users 5/);
    await assertAllGone(server);
  });

  it('passes a Ctrl-C on to the server, waits for it to stop, then ends as interrupted', async () => {
    const server = await wrappedServer('interrupted');
    const child = spawn(process.execPath, [CLI, 'load', 's1', '--spawn', server.command, '--url', server.url, '--rate', '5', '--duration', '60', '--think-ms', '100'], { stdio: 'ignore' });
    try {
      await eventually(() => portOpen(server.port), 'the server to listen', 30000);
      await new Promise((resolve) => setTimeout(resolve, 500)); // users running
      child.kill('SIGINT');
      const ended = await Promise.race([exited(child).then(() => child.signalCode), new Promise((resolve) => setTimeout(resolve, 15000, 'still running'))]);
      assert.equal(ended, 'SIGINT');
      await assertAllGone(server);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('says so at once when the server command ends before the server answers', async () => {
    const port = await freePort();
    const started = Date.now();
    const out = await load(['s1', '--spawn', `node -e 'process.exit(3)'`, '--url', `http://127.0.0.1:${port}`]);
    assert.equal(out.status, 2);
    assert.match(out.stderr, new RegExp(`^perseid load: cannot reach http://127\\.0\\.0\\.1:${port}: the --spawn command exited with status 3\\n`));
    assert.ok(Date.now() - started < 10000, 'not after the 30 s wait for a server to answer');
  });

  it('refuses to start the server command when something already answers at the URL', async () => {
    // A server left running: the one started would fail on the busy port while the old one took the load.
    const other = createServer((_request, response) => response.end('already here')).listen(0, '127.0.0.1');
    await once(other, 'listening');
    const url = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
    try {
      const out = await load(['s1', '--spawn', `node -e 'setTimeout(() => process.exit(3), 1000)'`, '--url', url, '--rate', '2', '--duration', '0.5']);
      assert.equal(out.status, 2, out.stdout);
      assert.match(out.stderr, new RegExp(`^perseid load: ${url} already answers before the --spawn command starts: stop the server there, or load it with --server-pid instead of --spawn\\n`));
    } finally {
      other.close();
    }
  });

  it('kills what does not stop on SIGTERM within the grace period, the wrapper and its child alike', async () => {
    const script = join(dir, 'stubborn.cjs');
    writeFileSync(script, `process.on('SIGTERM', () => {});\nrequire('fs').writeFileSync(${JSON.stringify(`${script}.ready`)}, '');\nsetInterval(() => {}, 1000);\n`);
    const server = await SpawnedServer.start(`sh -c 'node ${script}; true'`);
    await eventually(() => existsSync(`${script}.ready`), 'the server to ignore SIGTERM');
    assert.equal(processesWith(script).length, 2, 'the wrapper and its child');
    const started = Date.now();
    await server.stop('SIGTERM', 300);
    const took = Date.now() - started;
    assert.ok(took >= 300 && took < 3000, `stopped in ${took} ms`);
    assert.deepEqual(processesWith(script), []);
  });
});
