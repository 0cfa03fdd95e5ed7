/**
 * `perseid load` and the server's processes: the sampler measures everything
 * under the pid it is given (a real `--workers` primary's workers too).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { serviceUrl } from '../scripts/services/control.js';
import { ProcessSampler } from '../src/load/process-sampler.js';
import { cpuSeconds } from '../src/load/process-table.js';
import { runScenario } from '../src/load/run-scenario.js';
import { freshDatabase } from './databases.js';
import { startPerseid } from './processes.js';
import { needsServices } from './skips.js';

const mongo = await serviceUrl('mongo-java-server');

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
