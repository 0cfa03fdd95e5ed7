/**
 * Memory stays bounded whatever clients do: clients that never read their
 * replies (over WebSocket and SockJS polling), many of them at once against
 * the server-wide budget, one client's pipeline against everyone else's
 * latency, and the per-connection caps (subscriptions, waiting messages,
 * connections per address), each answered with its catalogued error.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { metrics } from '../src/metrics/registry.js';
import type { Subscription } from '../src/server/subscription.js';
import { OutputBudget, type BudgetMember } from '../src/transport/output-budget.js';
import { createLogger } from '../src/log.js';
import { openRawWebSocket, SockjsXhrSession, textFrame } from '../scripts/fuzz/wire.js';
import { RawPeer, startServer, type TestServer } from './helpers.js';
import { eventually, startPerseid, type PerseidProcess } from './processes.js';

/** A process's resident memory in bytes, from /proc. */
function rss(pid: number): number {
  const kib = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kib) * 1024;
}

const MiB = 1024 * 1024;

/** A client that connects, sends `messages`, and never reads a byte of what comes back. */
/** A DDP connection from `localAddress` (any 127.x.y.z is loopback: another client address). */
async function connectedFrom(url: string, localAddress: string): Promise<RawPeer> {
  const peer = await RawPeer.open(url, { localAddress });
  peer.send({ msg: 'connect', version: '1', support: ['1'] });
  await peer.next((m) => m.msg === 'connected');
  return peer;
}

/** Subscribes to `p`; resolves with its ready or nosub. */
async function sub(peer: RawPeer, id: string) {
  peer.send({ msg: 'sub', id, name: 'p' });
  return peer.next((m) => (m.msg === 'ready' && (m.subs as string[]).includes(id)) || (m.msg === 'nosub' && m.id === id));
}

async function silentClient(port: number, messages: unknown[], path = '/websocket'): Promise<Socket> {
  const { socket, response } = await openRawWebSocket(port, path);
  assert.match(response, /^HTTP\/1.1 101/);
  socket.write(Buffer.concat(messages.map((m) => textFrame(JSON.stringify(m)))));
  return socket; // left paused: the kernel's buffers fill, then the server's
}

async function stat(url: string, name: string): Promise<number> {
  const stats = (await (await fetch(`${url}/perseid/stats`)).json()) as Record<string, number>;
  return stats[name] ?? 0;
}

describe('clients that never read (a real server process)', () => {
  let server: PerseidProcess;
  let dir: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'perseid-slow-readers-'));
    server = await startPerseid('dist/examples/tasks/app.js', ['--port', '0', '--data-dir', dir, '--max-buffered', '4MiB', '--max-total-buffered', '64MiB']);
    // About 1 MiB of tasks: each fetchTasks reply is that big.
    const seeder = await RawPeer.connected(`ws://127.0.0.1:${server.port}/websocket`);
    const n = 4000;
    for (let i = 0; i < n; i++) seeder.send({ msg: 'method', id: `s${i}`, method: 'insertTask', params: [{ description: `task ${i} ${'d'.repeat(200)}`, sessionId: 'seed' }] });
    await seeder.next((m) => m.msg === 'result' && m.id === `s${n - 1}`, 60000);
    seeder.close();
  });
  after(async () => {
    await server.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('8 clients × 60 fetchTasks they never read: the server stops building replies and its memory stays bounded', async () => {
    const bystander = await RawPeer.connected(`ws://127.0.0.1:${server.port}/websocket`);
    const baseline = rss(server.child.pid!);
    const calls = Array.from({ length: 60 }, (_, i) => ({ msg: 'method', id: `f${i}`, method: 'fetchTasks', params: [] }));
    const clients = await Promise.all(Array.from({ length: 8 }, () => silentClient(server.port, [{ msg: 'connect', version: '1', support: ['1'] }, ...calls])));
    // Watch for as long as answering all 480 calls takes an unbounded server (about 5 s here).
    let peak = baseline;
    const until = Date.now() + 6000;
    while (Date.now() < until) {
      peak = Math.max(peak, rss(server.child.pid!));
      await new Promise((r) => setTimeout(r, 50));
    }
    const grown = peak - baseline;
    assert.ok(grown < 150 * MiB, `RSS grew by ${Math.round(grown / MiB)} MiB (from ${Math.round(baseline / MiB)} MiB)`);
    assert.ok((await stat(server.url, 'perseid_output_waits_total')) >= 8, 'each silent session waits for its client to read');
    const { result } = await bystander.call('b', 'removeAllTasks', [{ sessionId: 'nobody' }]);
    assert.equal(result.error, undefined, 'another client is served meanwhile');
    for (const client of clients) client.destroy();
    bystander.close();
  });
});

const counter = (name: string) => metrics.snapshot()[name] ?? 0;

describe('the per-client cap', () => {
  let t: TestServer;
  before(async () => {
    t = await startServer(
      (server) => {
        // 40 × 64 KiB published in one turn: one flush batch of 2.5 MiB.
        server.publish('burst', function (this: Subscription) {
          for (let i = 0; i < 40; i++) this.added('burst', `d${i}`, { body: 'x'.repeat(64 * 1024) });
          this.ready();
        });
        server.methods({ echo: (x: unknown) => x });
      },
      { maxBufferedBytes: MiB },
    );
  });
  after(() => t.close());

  it('holds within one flush batch: the client is dropped before the batch is written', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    const sentBefore = counter('perseid_bytes_sent_total');
    peer.send({ msg: 'sub', id: 's', name: 'burst' });
    await peer.waitClosed();
    assert.ok(counter('perseid_bytes_sent_total') - sentBefore < MiB, 'less than the cap was written to it');
    assert.ok(!peer.received.some((m) => m.msg === 'ready'));
    const other = await RawPeer.connected(t.wsUrl);
    assert.equal((await other.call('1', 'echo', [1])).result.result, 1);
    other.close();
  });
});

describe('the server-wide output budget', () => {
  it('holds back the biggest holders first, drops them after a grace period, and lets go below the budget', () => {
    const events: string[] = [];
    const member = (name: string, bytes: number): BudgetMember & { bytes: number } => ({
      bytes,
      get bufferedBytes() {
        return this.bytes;
      },
      hold: (on) => events.push(`${on ? 'hold' : 'release'} ${name}`),
      dropOverBudget: () => events.push(`drop ${name}`),
    });
    const budget = new OutputBudget(10 * MiB, createLogger('test'));
    const [big, middle, small] = [member('big', 8 * MiB), member('middle', 4 * MiB), member('small', MiB)];
    for (const m of [small, big, middle]) budget.add(m);
    budget.check(1000);
    assert.deepEqual(events.splice(0), ['hold big'], '3 MiB over: the biggest holder covers it');
    budget.check(2000);
    assert.deepEqual(events.splice(0), [], 'within the grace period nothing more happens');
    big.bytes = 2 * MiB;
    budget.check(2500);
    assert.deepEqual(events.splice(0), ['release big'], 'under the budget again: let go');
    big.bytes = 9 * MiB;
    budget.check(3000);
    budget.check(5100);
    assert.deepEqual(events.splice(0), ['hold big', 'drop big'], 'still over after the grace period: dropped');
    middle.bytes = 30 * MiB;
    budget.check(6000);
    budget.check(6001);
    assert.deepEqual(events.splice(0), ['hold middle', 'drop middle'], 'twice over the budget: dropped without grace');
    budget.close();
  });

  it('drops clients that never read when together they hold more than the budget; a reading client is untouched', async () => {
    const t = await startServer(
      (server, { collection }) => {
        const feed = collection('feed');
        server.publish('feed', () => feed.find());
        server.methods({ add: (n: unknown) => feed.insertAsync({ n, body: 'x'.repeat(256 * 1024) }) });
      },
      { maxBufferedBytes: 64 * MiB, maxTotalBufferedBytes: 4 * MiB },
    );
    try {
      const reader = await RawPeer.connected(t.wsUrl);
      reader.send({ msg: 'sub', id: 'r', name: 'feed' });
      await reader.next((m) => m.msg === 'ready');
      const silent = await Promise.all([1, 2, 3].map(() => silentClient(t.port, [{ msg: 'connect', version: '1', support: ['1'] }, { msg: 'sub', id: 's', name: 'feed' }])));
      await eventually(() => t.server.sessionCount === 4, 'the silent clients to connect');
      const dropsBefore = counter('perseid_output_budget_drops_total');
      // 25 MiB to each: more than the kernel buffers a client that does not read.
      for (let i = 0; i < 100; i++) await reader.call(`a${i}`, 'add', [i]);
      await eventually(() => t.server.sessionCount === 1, 'the silent clients to be dropped', 15000);
      assert.ok(counter('perseid_output_budget_drops_total') - dropsBefore >= 1, 'dropped for the budget');
      assert.ok(counter('perseid_output_budget_holds_total') >= 1, 'held back first');
      assert.equal(reader.received.filter((m) => m.msg === 'added').length, 100, 'the reading client got every document');
      assert.equal(reader.closed, undefined);
      for (const socket of silent) socket.destroy();
      reader.close();
    } finally {
      await t.close();
    }
  });
});

describe('SockJS polling sessions', () => {
  let t: TestServer;
  before(async () => {
    t = await startServer((server) => server.methods({ big: (kib: unknown) => 'x'.repeat((kib as number) * 1024) }), { maxBufferedBytes: 4 * MiB });
  });
  after(() => t.close());

  it('count what waits for the next poll, stop building replies past the high-water mark, and lose nothing', async () => {
    const session = await SockjsXhrSession.open(t.port);
    await session.send([JSON.stringify({ msg: 'connect', version: '1', support: ['1'] })]);
    assert.ok((await session.poll()).messages.some((m) => m.includes('"connected"')));
    const waitsBefore = counter('perseid_output_waits_total');
    // 60 calls in one xhr_send, then no poll: 15 MiB of replies if all were built.
    await session.send(Array.from({ length: 60 }, (_, i) => JSON.stringify({ msg: 'method', id: `c${i}`, method: 'big', params: [256] })));
    await eventually(() => counter('perseid_output_waits_total') > waitsBefore, 'the session to wait for its client');
    await eventually(() => counter('perseid_unsent_bytes') >= MiB, 'the unsent bytes to be counted');
    assert.ok(counter('perseid_unsent_bytes') <= 4 * MiB, `at most the cap is queued (${counter('perseid_unsent_bytes')} bytes)`);
    const results = new Set<string>();
    await eventually(
      async () => {
        for (const text of (await session.poll()).messages) {
          const m = JSON.parse(text) as { msg: string; id?: string; result?: string };
          if (m.msg === 'result' && m.result?.length === 256 * 1024) results.add(m.id!);
        }
        return results.size === 60;
      },
      'every reply, as the client polls',
      30000,
    );
  });
});

describe('per-connection caps', () => {
  let t: TestServer;
  before(async () => {
    t = await startServer(
      (server) => {
        server.publish('p', function () {
          this.ready();
        });
        server.methods({
          echo: (x: unknown) => x,
          slow: () => new Promise((resolve) => setTimeout(() => resolve('slept'), 300)),
        });
      },
      { maxSubscriptionsPerConnection: 5, maxQueuedMessages: 20, maxConnectionsPerAddress: 3, httpForwardedCount: 1 },
    );
  });
  after(() => t.close());

  it('answers a subscription past the limit with nosub and TOO_MANY_SUBSCRIPTIONS', async () => {
    const peer = await RawPeer.connected(t.wsUrl, '1');
    for (let i = 0; i < 5; i++) {
      peer.send({ msg: 'sub', id: `s${i}`, name: 'p' });
      await peer.next((m) => m.msg === 'ready');
    }
    peer.send({ msg: 'sub', id: 's5', name: 'p' });
    const refused = await peer.next((m) => m.msg === 'nosub');
    assert.deepEqual(refused.error, {
      isClientSafe: true,
      error: 429,
      reason: 'Too many subscriptions on one connection (the limit is 5)',
      message: 'Too many subscriptions on one connection (the limit is 5) [429]',
      errorType: 'Meteor.Error',
    });
    peer.send({ msg: 'unsub', id: 's0' });
    await peer.next((m) => m.msg === 'nosub' && m.id === 's0');
    peer.send({ msg: 'sub', id: 's6', name: 'p' });
    assert.equal((await peer.next((m) => m.msg === 'ready' || m.msg === 'nosub')).msg, 'ready');
    peer.close();
  });

  it('drops a client with more messages waiting than the limit (SockJS polling cannot be paused) with TOO_MANY_WAITING', async () => {
    const session = await SockjsXhrSession.open(t.port, { 'x-forwarded-for': '198.51.100.9' });
    await session.send([JSON.stringify({ msg: 'connect', version: '1', support: ['1'] })]);
    await session.poll();
    await session.send(Array.from({ length: 30 }, (_, i) => JSON.stringify({ msg: 'method', id: `w${i}`, method: 'slow', params: [] })));
    const seen: string[] = [];
    let closed: [number, string] | undefined;
    await eventually(
      async () => {
        const polled = await session.poll();
        seen.push(...polled.messages);
        closed ??= polled.closed;
        return closed !== undefined;
      },
      'the session to be closed',
      10000,
    );
    assert.ok(seen.some((m) => m === JSON.stringify({ msg: 'error', reason: 'Too many messages waiting to run' })), seen.join());
  });

  it('refuses a connection past the limit per client address with TOO_MANY_CONNECTIONS, counting forwarded addresses', async () => {
    const from = (address: string) => RawPeer.open(t.wsUrl, { headers: { 'x-forwarded-for': address } });
    const three = await Promise.all([1, 2, 3].map(() => from('203.0.113.7')));
    const fourth = await from('203.0.113.7');
    assert.deepEqual(await fourth.next(), { msg: 'error', reason: 'Too many connections from your address (the limit is 3)' });
    await fourth.waitClosed();
    const elsewhere = await from('203.0.113.8');
    elsewhere.send({ msg: 'connect', version: '1', support: ['1'] });
    assert.equal((await elsewhere.next()).msg, 'connected');
    // Once one of the three has gone, its place is free again (as soon as the server has seen it go).
    three[0]!.close();
    let again: RawPeer | undefined;
    await eventually(async () => {
      const peer = await from('203.0.113.7');
      peer.send({ msg: 'connect', version: '1', support: ['1'] });
      if ((await peer.next()).msg === 'connected') again = peer;
      else peer.close();
      return again !== undefined;
    }, 'a connection from the same address to be accepted again');
    for (const peer of [...three, elsewhere, again!]) peer.close();
  });

  it('counts an IPv6 client by its /64: one host is given 2^64 addresses', async () => {
    const from = (address: string) => RawPeer.open(t.wsUrl, { headers: { 'x-forwarded-for': address } });
    const three = await Promise.all(['2001:db8:7:7::1', '2001:db8:7:7::2', '2001:db8:7:7:ffff:1:2:3'].map(from));
    for (const peer of three) {
      peer.send({ msg: 'connect', version: '1', support: ['1'] });
      assert.equal((await peer.next()).msg, 'connected');
    }
    const fourth = await from('2001:db8:7:7:abcd::9');
    assert.deepEqual(await fourth.next(), { msg: 'error', reason: 'Too many connections from your address (the limit is 3)' });
    await fourth.waitClosed();
    const otherNetwork = await from('2001:db8:7:8::1');
    otherNetwork.send({ msg: 'connect', version: '1', support: ['1'] });
    assert.equal((await otherNetwork.next()).msg, 'connected');
    for (const peer of [...three, otherNetwork]) peer.close();
  });
});

describe('the server-wide subscription budget', () => {
  it('refuses a subscription past the limit over all connections with SERVER_SUBSCRIPTION_LIMIT, and frees places on unsub and on close', async () => {
    const t = await startServer((server) => server.publish('p', function () {
      this.ready();
    }), { maxTotalSubscriptions: 4 });
    try {
      // From two addresses: one address may hold only half of the places.
      const [a, b] = await Promise.all([connectedFrom(t.wsUrl, '127.0.0.1'), connectedFrom(t.wsUrl, '127.0.0.2')]);
      for (const [peer, id] of [[a, 'a1'], [a, 'a2'], [b, 'b1'], [b, 'b2']] as const) assert.equal((await sub(peer, id)).msg, 'ready');
      const refused = await sub(a, 'a3');
      assert.deepEqual(refused.error, {
        isClientSafe: true,
        error: 503,
        reason: 'The server holds as many subscriptions as it may (the limit is 4): try again later',
        message: 'The server holds as many subscriptions as it may (the limit is 4): try again later [503]',
        errorType: 'Meteor.Error',
      });
      a.send({ msg: 'unsub', id: 'a1' });
      await a.next((m) => m.msg === 'nosub' && m.id === 'a1');
      const c = await connectedFrom(t.wsUrl, '127.0.0.3');
      assert.equal((await sub(c, 'c1')).msg, 'ready');
      assert.equal((await sub(c, 'c2')).msg, 'nosub');
      // A connection that closes gives back its places (one that drops holds them while its session waits to resume).
      b.close();
      await eventually(async () => (await sub(c, `c-${Math.random()}`)).msg === 'ready', 'places freed by the closed connection');
      a.close();
      c.close();
    } finally {
      await t.close();
    }
  });
});

describe('the server-wide subscription budget shared between addresses', () => {
  it('lets one address hold half of it at most, so another is still served, with ADDRESS_SUBSCRIPTION_LIMIT past that', async () => {
    const t = await startServer((server) => server.publish('p', function () {
      this.ready();
    }), { maxTotalSubscriptions: 4 });
    try {
      // One client's two connections: their subscriptions count together.
      const [first, second] = await Promise.all([connectedFrom(t.wsUrl, '127.0.0.1'), connectedFrom(t.wsUrl, '127.0.0.1')]);
      assert.equal((await sub(first, 'f1')).msg, 'ready');
      assert.equal((await sub(second, 's1')).msg, 'ready');
      const refused = await sub(second, 's2');
      assert.deepEqual(refused.error, {
        isClientSafe: true,
        error: 429,
        reason: 'Too many subscriptions from your address (the limit is 2)',
        message: 'Too many subscriptions from your address (the limit is 2) [429]',
        errorType: 'Meteor.Error',
      });
      const other = await connectedFrom(t.wsUrl, '127.0.0.2');
      assert.equal((await sub(other, 'o1')).msg, 'ready');
      assert.equal((await sub(other, 'o2')).msg, 'ready');
      // The first address's places come back as its connection closes.
      first.close();
      await eventually(async () => (await sub(second, `s-${Math.random()}`)).msg === 'ready', 'the closed connection\'s place given back');
      for (const peer of [second, other]) peer.close();
    } finally {
      await t.close();
    }
  });
});

describe('the server-wide subscription budget and connections that close mid-subscription', () => {
  it('gives back the place of a subscription whose connection closed while a dispatch hook (a rate limit on Redis) held it', async () => {
    let held = 0;
    let passed = 0;
    const t = await startServer((server) => {
      server.publish('p', function () {
        this.ready();
      });
      server.beforeDispatch(async () => {
        held++;
        await new Promise((resolve) => setTimeout(resolve, 200));
        passed++;
      });
    }, { maxTotalSubscriptions: 1 });
    try {
      const leaving = await RawPeer.connected(t.wsUrl, '1');
      leaving.send({ msg: 'sub', id: 'gone', name: 'p' });
      await eventually(() => held === 1, 'the hook to hold the subscription');
      leaving.close();
      await eventually(() => t.server.sessionCount === 0, 'the connection to close');
      await eventually(() => passed === 1, 'the hook to let the subscription through');
      const next = await RawPeer.connected(t.wsUrl, '1');
      next.send({ msg: 'sub', id: 'here', name: 'p' });
      const answer = await next.next((m) => (m.msg === 'ready' || m.msg === 'nosub'), 5000);
      assert.equal(answer.msg, 'ready', JSON.stringify(answer));
      next.close();
    } finally {
      await t.close();
    }
  });
});

describe('fairness (a real server process)', () => {
  let server: PerseidProcess;
  let dir: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'perseid-fairness-'));
    server = await startPerseid('dist/test/fixtures/hostile-app.js', ['--port', '0', '--data-dir', dir]);
  });
  after(async () => {
    await server.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it("keeps another client's round trips fast while one connection pipelines 20,000 calls", async () => {
    const url = `ws://127.0.0.1:${server.port}/websocket`;
    const prober = await RawPeer.connected(url);
    // The pipelining client runs in its own process: what is measured is the server, not this one.
    const flood = spawn(process.execPath, ['dist/test/fixtures/pipeline-client.js', url, '20000'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    const finished = new Promise<void>((resolve, reject) => {
      flood.stdout!.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('done')) resolve();
      });
      flood.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`the pipelining client exited with ${code}`))));
    });
    await eventually(() => output.includes('sent'), 'the calls to be sent', 30000);
    let done = false;
    void finished.then(() => (done = true));
    const latencies: number[] = [];
    for (let i = 0; !done; i++) {
      const started = performance.now();
      await prober.call(`p${i}`, 'echo', [i]);
      latencies.push(performance.now() - started);
    }
    await finished;
    assert.ok(latencies.length >= 20, `${latencies.length} round trips while the pipeline ran`);
    latencies.sort((a, b) => a - b);
    const p99 = latencies[Math.floor(latencies.length * 0.99)]!;
    assert.ok(p99 < 200, `p99 of ${latencies.length} round trips: ${Math.round(p99)} ms (max ${Math.round(latencies.at(-1)!)} ms)`);
    prober.close();
  });
});

describe('a client that pipelines calls and leaves', () => {
  it('has its calls stop running as soon as its connection is gone, not after every message already read', async () => {
    let ran = 0;
    const t = await startServer((server) =>
      server.methods({
        work() {
          ran++;
          const end = performance.now() + 1;
          while (performance.now() < end); // 1 ms of work per call
        },
      }),
    );
    try {
      const { socket } = await openRawWebSocket(t.port);
      const frames = [textFrame(JSON.stringify({ msg: 'connect', version: '1', support: ['1'] }))];
      for (let i = 0; i < 3000; i++) frames.push(textFrame(JSON.stringify({ msg: 'method', id: `m${i}`, method: 'work', params: [] })));
      socket.write(Buffer.concat(frames));
      await eventually(() => ran > 0, 'the first call to run');
      socket.resetAndDestroy();
      const atLeave = ran;
      // Until the count stands still for half a second (bounded: 3,000 calls of 1 ms).
      let last = -1;
      for (const deadline = Date.now() + 20000; ran !== last && Date.now() < deadline; ) {
        last = ran;
        await new Promise((r) => setTimeout(r, 500));
      }
      assert.ok(ran - atLeave < 100, `${ran - atLeave} calls ran after the client left (${ran} in all)`);
    } finally {
      await t.close();
    }
  });
});

describe('sessions waiting for their clients to come back', () => {
  it('are no more per address than it may have connections, the oldest ending first', async () => {
    const t = await startServer(() => undefined, { maxConnectionsPerAddress: 3 });
    try {
      const sessions: string[] = [];
      for (let i = 1; i <= 6; i++) {
        const peer = await RawPeer.connected(t.wsUrl);
        sessions.push(peer.session);
        peer.ws.terminate(); // gone without a close: its session waits for it
        await eventually(() => t.server.connectionCount === 0, 'the server to see the connection go');
        assert.equal(t.server.awaitingResumeCount, Math.min(i, 3), `sessions waiting after ${i} vanished`);
      }
      const resume = async (session: string) => {
        const peer = await RawPeer.open(t.wsUrl);
        peer.send({ msg: 'connect', version: '1', support: ['1'], session, receivedCount: 1 });
        const { session: got } = await peer.next((m) => m.msg === 'connected');
        peer.close();
        return got;
      };
      assert.equal(await resume(sessions[5]!), sessions[5], 'the newest is there to resume');
      assert.notEqual(await resume(sessions[2]!), sessions[2], 'the older ones ended');
    } finally {
      await t.close();
    }
  });
});
