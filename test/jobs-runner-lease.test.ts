/** The jobs runner's lease: when it may claim runs under it. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LeaseFactory } from '../src/coordination/lease.js';
import { RunnerLease } from '../src/jobs/runner-lease.js';
import { createLogger } from '../src/log.js';

describe('the runner lease', () => {
  it('judges itself fresh by the time elapsed, not by the wall clock, which may be set back', async (t) => {
    let reachable = true;
    const leases: LeaseFactory = ({ name }) => ({ name, acquire: async () => (reachable ? 1 : Promise.reject(new Error('the lease store is unreachable'))), release: async () => undefined });
    const runner = new RunnerLease(leases, 'runner-a', 200, createLogger('test'), () => undefined);
    await runner.start();
    assert.deepEqual(await runner.fresh(), { holder: 'runner-a', token: 1 });
    // The store stops answering, and the clock is set back an hour (NTP, a VM restored): the wall clock stands still here.
    reachable = false;
    t.mock.timers.enable({ apis: ['Date'], now: Date.now() - 3_600_000 });
    await sleep(150);
    assert.equal(await runner.fresh(), undefined, 'no run may be claimed under a lease unconfirmed for over half its time');
    runner.halt();
    await runner.stop();
  });
});
