/**
 * `perseid autoscale --dry-run` as a real process against a registry the
 * test fills with servers: it changes nothing, so each round decides from
 * the servers discovery shows (not from a count it decided and never made),
 * and exports the count it sees. A change of that count (KEDA or the HPA
 * following the exported decision) restarts its rounds, as its own change
 * would. A registry that is down when it starts (MongoDB, Redis: a port with
 * nothing behind it, then a relay to the shared server on that port) costs
 * one line, and the rounds resume once it is up; a metrics port in use is
 * one line too.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { MongoClient } from 'mongodb';
import { serviceUrl } from '../scripts/services/control.js';
import { freePort } from '../scripts/services/process.js';
import { redisKeyPrefix } from '../src/redis-keys.js';
import { MongoDiscoveryStore } from '../src/cluster/discovery-store-mongo.js';
import { RedisDiscoveryStore } from '../src/cluster/discovery-store-redis.js';
import { Random } from '../src/ddp/random.js';
import { freshDatabase } from './databases.js';
import { eventually, exited, spawnPerseid, type PerseidCommand } from './processes.js';
import { needsServices } from './skips.js';
import { entry } from './suites/actuator.js';

const [redisUrl, mongo] = await Promise.all([serviceUrl('redis'), serviceUrl('mongo-java-server')]);

/** A TCP relay on `port` (on loopback) to `target`'s port: a server coming up where there was nothing. */
async function relay(port: number, target: string): Promise<{ close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(new URL(target).port), '127.0.0.1');
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

const ROUND = / autoscale {2}servers /;
/** What a line of a stack trace looks like. */
const STACK = /^\s+at /m;

describe('perseid autoscale --dry-run', { skip: needsServices({ redis: redisUrl }) }, () => {
  // Discovery is in Redis: the MongoDB URL only names the registry's namespace, nothing connects to it.
  const mongoUrl = `mongodb://127.0.0.1:1/perseid_dry_run_${Random.id(8).toLowerCase()}`;
  const redis = new Redis(redisUrl!);
  const store = new RedisDiscoveryStore(redis, `${redisKeyPrefix(mongoUrl)}servers:`);
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

describe('perseid autoscale with its registry down at start', () => {
  const commands: PerseidCommand[] = [];
  after(async () => {
    for (const command of commands) if (command.child.exitCode === null) await command.stop();
  });

  it('MongoDB: says so once, and reads the registry once it is up', { skip: needsServices({ 'mongo-java-server': mongo }) }, async () => {
    const port = await freePort();
    const database = freshDatabase(`mongodb://127.0.0.1:${port}/`);
    const autoscale = spawnPerseid(['autoscale', '--dry-run', '--discovery', 'mongo', '--interval-s', '0.2', '--discovery-interval-ms', '1000'], {
      MONGO_URL: `${database.url}?directConnection=true&serverSelectionTimeoutMS=300`,
      REDIS_URL: '',
      PERSEID_LOG_LEVEL: 'info',
    });
    commands.push(autoscale);
    const up = await (async () => {
      await eventually(() => /autoscale round failed; retrying .*cannot reach MongoDB/.test(autoscale.output()), `the failure to be logged:\n${autoscale.output()}`, 10000);
      // Rounds keep failing a while, the database still down.
      await new Promise((r) => setTimeout(r, 1500));
      return relay(port, mongo!);
    })();
    const client = new MongoClient(`${database.url}?directConnection=true`);
    try {
      const store = new MongoDiscoveryStore(async () => client.db());
      // The last announcement is awaited before the client closes: closing fails an operation under way.
      let putting: Promise<unknown> = Promise.resolve();
      const announcing = setInterval(() => (putting = store.put(entry('a', 3), 3000).catch(() => undefined)), 200);
      try {
        // The round's line (stdout), then the log's (stderr).
        const seen = () => autoscale.output().split('\n').some((line) => ROUND.test(line) && /servers 1\/1 /.test(line)) && /autoscale round works again/.test(autoscale.output());
        await eventually(seen, `a round seeing the server:\n${autoscale.output()}`, 20000);
      } finally {
        clearInterval(announcing);
        await putting;
      }
      const output = autoscale.output();
      // A line when rounds start failing and when the reason changes (a refused connection, a selection timeout), not one per round.
      const lines = output.match(/round failed/g)?.length ?? 0;
      const rounds = Number(/autoscale round works again failures=(\d+)/.exec(output)?.[1]);
      assert.ok(lines >= 1 && lines <= 3 && rounds > 2 * lines, `${lines} failure lines for ${rounds} failed rounds:\n${output}`);
      assert.doesNotMatch(output, /Topology is closed/);
      assert.doesNotMatch(output, STACK);
    } finally {
      await client.close();
      await database.drop();
      await autoscale.stop();
      await up.close();
    }
  });

  it('Redis: one line per change of state, no ioredis stack, no desired count exported before a round, and the rounds resume', { skip: needsServices({ redis: redisUrl }) }, async () => {
    const [port, metricsPort] = [await freePort(), await freePort()];
    const exported = () => fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text(), () => '');
    const autoscale = spawnPerseid(['autoscale', '--dry-run', '--interval-s', '0.2', '--metrics-port', String(metricsPort)], {
      MONGO_URL: `mongodb://127.0.0.1:1/perseid_dry_run_${Random.id(8).toLowerCase()}`,
      REDIS_URL: `redis://127.0.0.1:${port}`,
      PERSEID_LOG_LEVEL: 'info',
    });
    commands.push(autoscale);
    await eventually(() => /redis connection failed; retrying .*ECONNREFUSED/.test(autoscale.output()), `the failure to be logged:\n${autoscale.output()}`, 10000);
    // ioredis retries every few hundred ms: each retry fails the same way, and is not logged again.
    await new Promise((r) => setTimeout(r, 1500));
    // No round has read the registry: a desired count of 0 here would have the HPA scale down to its minimum.
    const before = await exported();
    assert.match(before, /perseid_autoscale_scale_failures 0/);
    assert.ok(Number(/^perseid_autoscale_round_failures (\d+)$/m.exec(before)?.[1]) >= 1, `no failed rounds exported:\n${before}`);
    assert.doesNotMatch(before, /^perseid_autoscale_(desired|current)_instances /m);
    const up = await relay(port, redisUrl!);
    try {
      const seen = () => autoscale.output().split('\n').some((line) => ROUND.test(line)) && /redis connection works again/.test(autoscale.output());
      await eventually(seen, `a round once Redis is up:\n${autoscale.output()}`, 15000);
      await eventually(async () => /^perseid_autoscale_desired_instances 1$/m.test(await exported()), 'the desired count to be exported', 5000);
      assert.match(await exported(), /^perseid_autoscale_round_failures 0$/m);
      const output = autoscale.output();
      assert.equal(output.match(/redis connection failed/g)?.length, 1, `one line for the connection's failure:\n${output}`);
      assert.match(output, /redis connection works again/);
      assert.doesNotMatch(output, /Unhandled error event/);
      assert.doesNotMatch(output, STACK);
    } finally {
      await autoscale.stop();
      await up.close();
    }
  });

  it('a window of rounds shorter than the hold time: one line saying so, before connecting', async () => {
    const autoscale = spawnPerseid(['autoscale', '--dry-run', '--window-s', '30', '--hold-s', '60'], { MONGO_URL: 'mongodb://127.0.0.1:1/x', REDIS_URL: '' });
    // Bounded: an autoscaler that accepts the options keeps running against the unreachable registry.
    const killer = setTimeout(() => autoscale.child.kill('SIGKILL'), 10_000);
    const code = await exited(autoscale.child).finally(() => clearTimeout(killer));
    assert.equal(autoscale.child.signalCode, null, `it did not refuse the options:\n${autoscale.output()}`);
    assert.notEqual(code, 0);
    assert.match(autoscale.output(), /^perseid autoscale: --window-s \(30\) must be at least --hold-s \(60\): [^\n]*\n\nRun `perseid autoscale --help` for usage.\n$/);
  });

  it('--min 0: one line saying no server would be left to report load, before connecting', async () => {
    const autoscale = spawnPerseid(['autoscale', '--dry-run', '--min', '0'], { MONGO_URL: 'mongodb://127.0.0.1:1/x', REDIS_URL: '' });
    // Bounded: an autoscaler that accepts the options keeps running against the unreachable registry.
    const killer = setTimeout(() => autoscale.child.kill('SIGKILL'), 10_000);
    const code = await exited(autoscale.child).finally(() => clearTimeout(killer));
    assert.equal(autoscale.child.signalCode, null, `it did not refuse --min 0:\n${autoscale.output()}`);
    assert.notEqual(code, 0);
    assert.match(autoscale.output(), /^perseid autoscale: min must be a whole number, 1 or more: with no server running, none reports load[^\n]*\n\nRun `perseid autoscale --help` for usage.\n$/);
  });

  it('--local-arg giving the port, host or public URL --local gives each server: one line, before connecting', async () => {
    for (const arg of ['--port=4000', '--public-url=http://a.test', '-p4000']) {
      const autoscale = spawnPerseid(['autoscale', '--local', 'app.js', `--local-arg=${arg}`], { MONGO_URL: 'mongodb://127.0.0.1:1/x', REDIS_URL: '' });
      // Bounded: an autoscaler that accepts it keeps running against the unreachable registry.
      const killer = setTimeout(() => autoscale.child.kill('SIGKILL'), 10_000);
      const code = await exited(autoscale.child).finally(() => clearTimeout(killer));
      assert.equal(autoscale.child.signalCode, null, `it accepted ${arg}:\n${autoscale.output()}`);
      assert.notEqual(code, 0);
      assert.match(autoscale.output(), new RegExp(`^perseid autoscale: --local-arg ${arg}: --local gives each server its own free port, its host \\(127.0.0.1\\) and its public URL; leave them out\n`));
    }
  });

  it('a metrics port in use: one line naming --metrics-port, exit 1', async () => {
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const { port } = holder.address() as net.AddressInfo;
    try {
      const autoscale = spawnPerseid(['autoscale', '--dry-run', '--metrics-port', String(port)], { MONGO_URL: 'mongodb://127.0.0.1:1/x', REDIS_URL: '' });
      assert.equal(await exited(autoscale.child), 1);
      assert.equal(autoscale.output(), `perseid autoscale: port ${port} on 127.0.0.1 is already in use (another server?): stop it, or choose another port with --metrics-port or PERSEID_AUTOSCALE_METRICS_PORT\n`);
    } finally {
      holder.close();
    }
  });
});
