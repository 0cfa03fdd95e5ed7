/**
 * What every actuator owes (autoscale/actuator.ts), written once and run
 * against each (test/autoscale-actuators.test.ts): report its count, raise
 * it, lower it draining the least loaded servers first where it chooses,
 * refuse impossible counts.
 */
import assert from 'node:assert/strict';
import { backendTest } from './backend-test.js';
import type { Actuator } from '../../src/autoscale/actuator.js';
import type { ServerEntry } from '../../src/cluster/discovery-store.js';
import { eventually } from '../processes.js';

export interface ActuatorBackend {
  actuator: Actuator;
  /** The count it starts with. */
  initial: number;
  /** What discovery would show now: one entry per server it runs, each with some load. */
  servers(): Promise<ServerEntry[]>;
  /** Ids (as in servers()) of the servers it drained, for actuators that choose which; undefined where the platform chooses. */
  drained?(): Promise<string[]>;
  close(): Promise<void>;
}

/** A discovery entry for tests: `sessions` differ per server so "least loaded" means something. */
export function entry(id: string, sessions: number, extra: Partial<ServerEntry> = {}): ServerEntry {
  return { id, url: `http://${id}.test`, balancer: false, role: 'all', sessions, cpuPercent: 10, lagMs: 0, memoryMb: 80, methodP95Ms: 1, updatedAt: Date.now(), ...extra };
}

export function actuatorSuite(make: () => Promise<ActuatorBackend>): void {
  const run = backendTest(make);

  run('reports the count it starts with', async (b) => {
    assert.equal(await b.actuator.current(await b.servers()), b.initial);
  });

  run('raises the count, and settles once the servers are there', async (b) => {
    await b.actuator.scaleTo(b.initial + 2, await b.servers());
    assert.equal(await b.actuator.current(await b.servers()), b.initial + 2);
    await eventually(async () => (await b.actuator.settling(await b.servers())) === undefined, 'the change to settle', 20000);
  });

  run('lowers the count, draining the least loaded servers first', async (b) => {
    await b.actuator.scaleTo(b.initial + 3, await b.servers());
    await eventually(async () => (await b.actuator.settling(await b.servers())) === undefined, 'the raise to settle', 20000);
    const before = await b.servers();
    await b.actuator.scaleTo(b.initial + 1, before);
    assert.equal(await b.actuator.current(await b.servers()), b.initial + 1);
    if (b.drained) {
      const expected = [...before].sort((x, y) => x.sessions - y.sessions).slice(0, 2).map((s) => s.id);
      assert.deepEqual((await b.drained()).sort(), expected.sort(), `sessions were ${JSON.stringify(before.map((s) => [s.id, s.sessions]))}`);
    }
    await eventually(async () => (await b.actuator.settling(await b.servers())) === undefined, 'the drain to settle', 30000);
  });

  run('refuses a count that is negative or not whole', async (b) => {
    await assert.rejects(b.actuator.scaleTo(-1, await b.servers()), /cannot scale to -1/);
    await assert.rejects(b.actuator.scaleTo(1.5, await b.servers()), /cannot scale to 1.5/);
  });
}
