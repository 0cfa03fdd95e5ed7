/**
 * The autoscaler's rounds when the platform lets it down, on a real shell
 * command and discovery in memory, the clock given round by round: a change
 * that never settles, and a scale command that keeps failing.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { CommandActuator } from '../src/autoscale/actuator-command.js';
import { AutoscaleMetrics } from '../src/autoscale/autoscale-metrics.js';
import { Autoscaler } from '../src/autoscale/autoscaler.js';
import type { PolicyConfig } from '../src/autoscale/policy.js';
import { MemoryDiscoveryStore } from '../src/cluster/discovery-store-memory.js';
import type { Logger } from '../src/log.js';
import { entry } from './suites/actuator.js';

const S = 1000;
const POLICY: PolicyConfig = { min: 1, max: 4, step: 1, rules: [{ metric: 'sessions', above: 100, below: 10 }], holdMs: 0, minSamples: 1, upCooldownMs: 0, downCooldownMs: 0 };

/** A logger that keeps `level message` lines. */
function recordingLogger(lines: string[]): Logger {
  const at = (level: string) => (message: string, fields?: Record<string, unknown>) => void lines.push(`${level} ${message} ${JSON.stringify(fields ?? {})}`);
  const log: Logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error'), child: () => log };
  return log;
}

function setup(command: (dir: string) => string, settleTimeoutMs?: number) {
  const dir = mkdtempSync(join(tmpdir(), 'perseid-autoscaler-'));
  const store = new MemoryDiscoveryStore();
  const logLines: string[] = [];
  const printed: string[] = [];
  const log = recordingLogger(logLines);
  const metrics = new AutoscaleMetrics();
  const actuator = new CommandActuator({ template: command(dir), log });
  const autoscaler = new Autoscaler({ store, ttlMs: 3600 * S, actuator, policy: POLICY, intervalMs: 10 * S, windowMs: 3600 * S, settleTimeoutMs, print: (line) => printed.push(line), log, metrics });
  const announce = (id: string, sessions: number) => store.put({ ...entry(id, sessions), updatedAt: Date.now() });
  const gauge = async (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(await metrics.registry.metrics())?.[1]);
  return { dir, autoscaler, announce, logLines, printed, gauge, close: () => rmSync(dir, { recursive: true, force: true }) };
}

describe('the autoscaler when the platform lets it down', () => {
  const closers: Array<() => void> = [];
  after(() => closers.forEach((close) => close()));

  it('waits on a change that never settles until the settle timeout, says so once, then decides from the servers that answer', async () => {
    // The command succeeds, but no second server ever appears (a pod that cannot be scheduled).
    const t = setup((dir) => `echo {n} > ${join(dir, 'count')}`, 60 * S);
    closers.push(t.close);
    await t.announce('a', 500);
    assert.equal((await t.autoscaler.round(0)).decision.direction, 'up');
    assert.equal(readFileSync(join(t.dir, 'count'), 'utf8').trim(), '2');
    // The load goes; the change to 2 is still not done.
    await t.announce('a', 1);
    for (const at of [10, 30, 50]) {
      const round = await t.autoscaler.round(at * S);
      assert.equal(round.decision.direction, 'hold');
      assert.equal(round.decision.reason, 'settling: 1 of 2 servers in discovery');
    }
    assert.equal(await t.gauge('perseid_autoscale_unsettled_seconds'), 40);
    assert.ok(!t.logLines.some((line) => line.startsWith('warn')), t.logLines.join('\n'));

    const late = await t.autoscaler.round(70 * S);
    assert.equal(late.decision.direction, 'down', late.decision.reason);
    assert.equal(late.decision.desired, 1);
    assert.match(late.decision.reason, /^every rule under its lower threshold .* \(a change unsettled for 60 s\)$/);
    assert.match(t.printed.at(-1)!, /servers 1\/2 .* scale down to 1 /);
    assert.equal(readFileSync(join(t.dir, 'count'), 'utf8').trim(), '1');
    const warnings = t.logLines.filter((line) => line.startsWith('warn'));
    assert.deepEqual(warnings.length, 1);
    assert.match(warnings[0]!, /^warn a change has not settled in time; deciding from the servers that answer: check the platform \{"settling":"1 of 2 servers in discovery","afterS":60\}$/);
    // Back at a count discovery shows: settled.
    assert.match((await t.autoscaler.round(80 * S)).decision.reason, /^every rule under its lower threshold .*, but already at the minimum of 1$/);
    assert.equal(await t.gauge('perseid_autoscale_unsettled_seconds'), 0);
  });

  it('tries a failing scale again after the round interval, then twice as long each time, and forgets the failures once one works', async () => {
    const t = setup((dir) => `echo {n} >> ${join(dir, 'runs')}; test -e ${join(dir, 'works')} || { echo quota exceeded >&2; exit 3; }`);
    closers.push(t.close);
    await t.announce('a', 500);
    const runs = () => (existsSync(join(t.dir, 'runs')) ? readFileSync(join(t.dir, 'runs'), 'utf8').trim().split('\n').length : 0);
    const tried: number[] = [];
    const held: string[] = [];
    // Rounds every 10 s: tries at 0, 10 (after 10 s), 30 (after 20), 70 (after 40).
    for (let at = 0; at <= 60; at += 10) {
      const before = runs();
      try {
        const round = await t.autoscaler.round(at * S);
        held.push(round.decision.reason);
      } catch (error) {
        assert.match(String(error), /quota exceeded/);
      }
      if (runs() > before) tried.push(at);
    }
    assert.deepEqual(tried, [0, 10, 30]);
    assert.equal(held.at(-1), 'sessions 500 per server > 100 for 0 s, but scaling failed 3 times (the scale command exited with 3: quota exceeded): next try in 10 s');
    assert.equal(await t.gauge('perseid_autoscale_scale_failures'), 3);

    writeFileSync(join(t.dir, 'works'), '');
    const round = await t.autoscaler.round(70 * S);
    assert.equal(round.decision.direction, 'up');
    assert.equal(runs(), 4);
    await t.announce('b', 500);
    await t.autoscaler.round(80 * S);
    assert.equal(await t.gauge('perseid_autoscale_scale_failures'), 0);
  });
});
