/**
 * `npm run services`: its help names the run and cache directories, and `stop`
 * says what it stopped. Run against a private run directory, so the shared
 * services other suites use are never touched.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

const CLI = 'dist/scripts/services/cli.js';

describe('npm run services', () => {
  it('names its run and cache directories, and says what stop stopped', () => {
    const runDir = mkdtempSync(join(tmpdir(), 'perseid-services-test-'));
    try {
      const env = { ...process.env, PERSEID_SERVICES_RUN_DIR: runDir, PERSEID_SERVICES_CACHE_DIR: join(runDir, 'cache') };
      const help = spawnSync(process.execPath, [CLI, '--help'], { encoding: 'utf8', env });
      assert.equal(help.status, 0);
      assert.ok(help.stdout.includes(`Run directory (pid files, logs, data, services.json): ${runDir}`), help.stdout);
      assert.ok(help.stdout.includes(`Cache directory (downloads and builds, kept between runs): ${join(runDir, 'cache')}`));
      assert.match(help.stdout, /installs nginx and HAProxy/);
      // Nothing of this run directory runs: stop says so for each, and signals nothing.
      const stop = spawnSync(process.execPath, [CLI, 'stop'], { encoding: 'utf8', env });
      assert.equal(stop.status, 0, stop.stderr);
      assert.deepEqual(stop.stdout.trim().split('\n'), ['redis', 'mongo-java-server', 'ferretdb'].map((name) => `${name} was not running (nothing to stop)`));
    } finally {
      rmSync(runDir, { recursive: true, force: true });
    }
  });
});
