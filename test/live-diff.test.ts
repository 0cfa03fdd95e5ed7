/**
 * A short slice of the differential program (scripts/live-diff.ts): simpleddp
 * clients subscribed to many query shapes at once, through bursts of random
 * writes (some behind Perseid's back, some while subscriptions come and go,
 * some across a re-read of the change feed), must each show what fresh
 * queries of the database return, on every database target that runs.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { serviceUrl } from '../scripts/services/control.js';
import { runLiveDiff } from '../scripts/live-diff/run.js';
import type { TargetName } from '../scripts/live-diff/targets.js';
import { needsServices } from './skips.js';
import './helpers.js';

const urls = { 'mongo-java-server': await serviceUrl('mongo-java-server'), ferretdb: await serviceUrl('ferretdb'), redis: await serviceUrl('redis') };
const mjs = needsServices({ 'mongo-java-server': urls['mongo-java-server'] });

/** Bursts per target, for a few seconds each (FerretDB's oplog is the slowest to follow). */
const PLAN: Array<{ target: TargetName; steps: number; skip: string | false }> = [
  { target: 'embedded', steps: 40, skip: false },
  { target: 'mongo-java-server', steps: 12, skip: mjs },
  { target: 'mongo-java-server-poll', steps: 12, skip: mjs },
  { target: 'mongo-java-server-oplog', steps: 12, skip: mjs },
  { target: 'ferretdb-oplog', steps: 6, skip: needsServices({ ferretdb: urls.ferretdb }) },
  { target: 'fanout', steps: 12, skip: needsServices({ 'mongo-java-server': urls['mongo-java-server'], redis: urls.redis }) },
];

describe('the differential test of live queries', () => {
  for (const { target, steps, skip } of PLAN) {
    it(`shows every client what a fresh query returns on ${target}`, { skip }, async () => {
      for (const seed of ['suite-1', 'suite-2']) {
        const report = await runLiveDiff({ target, seed, steps, interruptEvery: 4 });
        assert.deepEqual(report.divergences, [], `replay: node dist/scripts/live-diff.js --target ${target} --seed ${seed} --steps ${report.steps}`);
        assert.equal(report.steps, steps);
        assert.equal(report.checks, steps * 5, 'every connection was compared after every burst');
        assert.ok(report.writes >= steps && report.interrupts >= 1, JSON.stringify(report));
        assert.ok(report.subscriptions > 29, 'subscriptions came and went');
      }
    });
  }

  it('has --help, and refuses a bad option with one line', () => {
    const help = spawnSync(process.execPath, ['dist/scripts/live-diff.js', '--help'], { encoding: 'utf8' });
    assert.equal(help.status, 0);
    assert.match(help.stdout, /^Compare what DDP clients are shown/);
    assert.match(help.stdout, /--seed <text>/);
    const bad = spawnSync(process.execPath, ['dist/scripts/live-diff.js', '--target', 'postgres'], { encoding: 'utf8' });
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /^live-diff: --target must be one of embedded, /);
  });
});
