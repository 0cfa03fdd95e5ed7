/**
 * What every lease implementation owes (coordination/lease.ts), written once
 * and run against each (test/coordination-lease.test.ts), as Centrifuge's
 * shared broker tests and Socket.IO's adapter suite are.
 */
import assert from 'node:assert/strict';
import { backendTest } from './backend-test.js';
import type { Lease, LeaseOptions } from '../../src/coordination/lease.js';
import { Random } from '../../src/ddp/random.js';

/** Makes a lease for `options`; every lease made by one factory competes with the others of the same name. */
export type MakeLease = (options: LeaseOptions) => Lease;

/** Retries `acquire` until it gives a token, failing after `withinMs`. */
async function acquireWithin(lease: Lease, withinMs: number): Promise<number> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const token = await lease.acquire();
    if (token !== undefined) return token;
    if (Date.now() > deadline) assert.fail(`${lease.name}: not acquired within ${withinMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export function leaseSuite(make: () => Promise<{ make: MakeLease; close(): Promise<void> }>): void {
  const name = () => `test-${Random.id(6)}`;
  const run = backendTest(make, (backend) => backend.make);

  run('gives the lease to one holder and keeps its token while it renews', async (lease) => {
    const n = name();
    const a = lease({ name: n, holder: 'a', ttlMs: 5000 });
    const b = lease({ name: n, holder: 'b', ttlMs: 5000 });
    const token = await a.acquire();
    assert.equal(typeof token, 'number');
    assert.equal(await b.acquire(), undefined, 'a second holder got a lease that was held');
    assert.equal(await a.acquire(), token, 'renewing changed the fencing token');
    assert.equal(await b.acquire(), undefined);
  });

  run('passes an expired lease to another holder with a larger token; the old holder is refused', async (lease) => {
    const n = name();
    const a = lease({ name: n, holder: 'a', ttlMs: 150 });
    const b = lease({ name: n, holder: 'b', ttlMs: 5000 });
    const first = (await a.acquire())!;
    const second = await acquireWithin(b, 3000);
    assert.ok(second > first, `token ${second} after ${first}`);
    assert.equal(await a.acquire(), undefined, 'the old holder renewed a lease another holder has');
  });

  run('a release lets the next holder in at once, with a larger token', async (lease) => {
    const n = name();
    const a = lease({ name: n, holder: 'a', ttlMs: 60000 });
    const b = lease({ name: n, holder: 'b', ttlMs: 60000 });
    const first = (await a.acquire())!;
    await a.release();
    const second = await b.acquire();
    assert.ok(second !== undefined && second > first, `token ${second} after ${first}`);
  });

  run('a late release by a former holder leaves the new holder alone', async (lease) => {
    const n = name();
    const a = lease({ name: n, holder: 'a', ttlMs: 150 });
    const b = lease({ name: n, holder: 'b', ttlMs: 60000 });
    const c = lease({ name: n, holder: 'c', ttlMs: 60000 });
    await a.acquire();
    const token = await acquireWithin(b, 3000);
    await a.release();
    assert.equal(await c.acquire(), undefined, "a's release freed b's lease");
    assert.equal(await b.acquire(), token);
  });

  run('of many holders asking at once, exactly one gets it', async (lease) => {
    const n = name();
    const holders = Array.from({ length: 8 }, (_, i) => lease({ name: n, holder: `h${i}`, ttlMs: 60000 }));
    const tokens = await Promise.all(holders.map((h) => h.acquire()));
    assert.equal(tokens.filter((t) => t !== undefined).length, 1, `granted: ${JSON.stringify(tokens)}`);
  });

  run('keeps leases of different names apart', async (lease) => {
    const a = lease({ name: name(), holder: 'a', ttlMs: 60000 });
    const b = lease({ name: name(), holder: 'b', ttlMs: 60000 });
    assert.notEqual(await a.acquire(), undefined);
    assert.notEqual(await b.acquire(), undefined);
  });
}
