/**
 * `perseid autoscale --dry-run` as a real process against a registry in
 * Redis that the test fills with servers: it changes nothing, so each round
 * decides from the servers discovery shows (not from a count it decided and
 * never made), and exports the count it sees. A change of that count (KEDA
 * or the HPA following the exported decision) restarts its rounds, as its
 * own change would.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { serviceUrl } from '../scripts/services/control.js';
import { freePort } from '../scripts/services/process.js';
import { keyPrefix } from '../src/cli/scale-out.js';
import { RedisDiscoveryStore } from '../src/cluster/discovery-store-redis.js';
import { Random } from '../src/ddp/random.js';
import { eventually, spawnPerseid, type PerseidCommand } from './processes.js';
import { needsServices } from './skips.js';
import { entry } from './suites/actuator.js';

const redisUrl = await serviceUrl('redis');

describe('perseid autoscale --dry-run', { skip: needsServices({ redis: redisUrl }) }, () => {
  // Discovery is in Redis: the MongoDB URL only names the registry's namespace, nothing connects to it.
  const mongoUrl = `mongodb://127.0.0.1:1/perseid_dry_run_${Random.id(8).toLowerCase()}`;
  const redis = new Redis(redisUrl!);
  const store = new RedisDiscoveryStore(redis, `${keyPrefix(mongoUrl)}servers:`);
  let autoscale: PerseidCommand | undefined;
  let announcing: NodeJS.Timeout | undefined;
  after(async () => {
    clearInterval(announcing);
    if (autoscale) assert.equal(await autoscale.stop(), 0, autoscale.output());
    await Promise.all(['a', 'b'].map((id) => store.remove(id)));
    redis.disconnect();
  });

  it('keeps deciding from the servers it sees, and exports the count it sees', async () => {
    const servers = new Map([
      ['a', 1],
      ['b', 1],
    ]);
    const announce = () => Promise.all([...servers].map(([id, sessions]) => store.put(entry(id, sessions), 3000)));
    await announce();
    announcing = setInterval(() => void announce(), 200);
    const metricsPort = await freePort();
    autoscale = spawnPerseid(
      [
        'autoscale', '--dry-run', '--min', '1', '--max', '4', '--rule', 'sessions:10:2',
        '--hold-s', '1', '--interval-s', '0.2', '--min-samples', '2', '--up-cooldown-s', '0', '--down-cooldown-s', '0',
        '--discovery-interval-ms', '1000', '--metrics-port', String(metricsPort),
      ],
      { REDIS_URL: redisUrl!, MONGO_URL: mongoUrl, PERSEID_LOG_LEVEL: 'info' },
    );
    const rounds = () => autoscale!.output().split('\n').filter((line) => line.includes(' autoscale  servers '));
    const roundAfter = async (from: number, pattern: RegExp, what: string) => {
      await eventually(() => rounds().slice(from).some((line) => pattern.test(line)), `${what}; rounds:\n${rounds().slice(-5).join('\n')}`, 15000);
    };

    await roundAfter(0, /servers 2\/2 .* -> {2}scale down to 1 \(every rule under/, 'a decision to scale down');
    // Nothing changed: the next rounds still see two servers and still want one.
    const decided = rounds().length;
    await roundAfter(decided, /servers 2\/2 .* -> {2}scale down to 1 /, 'the same decision again');
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    assert.match(text, /^perseid_autoscale_desired_instances 1$/m);
    assert.match(text, /^perseid_autoscale_current_instances 2$/m);
    assert.match(text, /^perseid_autoscale_servers_seen 2$/m);
    assert.match(text, /^perseid_autoscale_changes_total\{direction="down"\} 0$/m, 'a dry run makes no change');

    // Busy now: 15 sessions a server, over the limit of 10.
    for (const id of servers.keys()) servers.set(id, 15);
    const busy = rounds().length;
    await roundAfter(busy, /servers 2\/2 .*sessions 15 .* -> {2}scale up to 3 \(sessions 15 per server > 10 for 1 s\)/, 'a decision to scale up');
    assert.ok(!rounds().some((line) => /settling/.test(line)), 'a dry run waits for no change of its own');

    // Whoever acts on the decision changes what discovery shows: the rounds restart from that change.
    servers.delete('b');
    await store.remove('b');
    await roundAfter(busy, /servers 1\/1 .* -> {2}hold at 1 \(1 of 2 samples since the last change\)/, 'the rounds to restart at the count seen');
  });
});
