/**
 * docs/reference/metrics.md lists every metric family `/metrics` serves: this
 * fails when a server (on the embedded store, and with the MongoDB driver's
 * families loaded, and a balancer's or primary's) serves one the page lacks, or the page lists one no server
 * serves, or their types differ.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import '../src/data/mongo/store.js';
import { apm } from '../src/metrics/apm.js';
import { prometheusText } from '../src/metrics/prometheus.js';
import { rateLimiter } from '../src/rate-limit/index.js';
import { RawPeer, startServer } from './helpers.js';

function families(text: string): Map<string, string> {
  return new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
}

describe('the metrics reference page', () => {
  it('lists every metric family a server serves, with its type, and nothing else', async () => {
    const t = await startServer((server, { collection }) => {
      const items = collection('items');
      server.methods({ find: () => items.find({ n: 1 }).fetchAsync() });
      server.publish('items', () => items.find({}));
      // An app with a rate limit (every app with accounts has one) serves the limiter's families too.
      rateLimiter(server).addRule({ name: 'find' }, 100, 1000);
    });
    const peer = await RawPeer.connected(t.wsUrl);
    try {
      await peer.call('1', 'find');
      peer.send({ msg: 'sub', id: 's', name: 'items', params: [] });
      await peer.next((m) => m.msg === 'ready');
      const served = families(await (await fetch(`${t.url}/metrics`)).text());
      // The MongoDB commands' families, which appear once the driver reports one.
      const report = apm.report();
      const empty = { counts: [], count: 0, sum: 0, max: 0 };
      report.database.commands.push({ name: 'find', count: 0, failures: 0, time: empty });
      // And the jobs' families by job, which appear once a job has finished.
      for (const name of ['perseid_job_runs_total', 'perseid_job_duration_seconds_total']) report.counters.push({ name, help: '', kind: 'counter', value: 0, labels: { job: 'j' } });
      // And those of a balancer's or a primary's: every server's summary, the primary's own process.
      const extra = { servers: [{ server: 'a', sessions: 0, cpuPercent: 0, lagMs: 0, memoryMb: 0, methodsPerSec: 0, methodP95Ms: 0 }], primary: apm.ownFigures() };
      for (const [name, type] of families(await prometheusText([report], extra))) served.set(name, type);
      const page = readFileSync(new URL('../../docs/reference/metrics.md', import.meta.url), 'utf8');
      const listed = new Map([...page.matchAll(/^\| `(perseid_\w+)` \| (\w+) \|/gm)].map((m) => [m[1]!, m[2]!]));
      assert.deepEqual(
        { missingFromPage: [...served.keys()].filter((n) => !listed.has(n)), notServed: [...listed.keys()].filter((n) => !served.has(n)) },
        { missingFromPage: [], notServed: [] },
      );
      for (const [name, type] of served) assert.equal(listed.get(name), type, name);
    } finally {
      peer.ws.close();
      await t.close();
    }
  });
});
