/** DDP protocol conformance, message type by message type, over real sockets (DDP notes §1). */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DDPError } from '../src/ddp/errors.js';
import { setLogLevel, setLogSink } from '../src/log.js';
import { RandomStream, collectionIdSequence } from '../src/ddp/random.js';
import type { Collection } from '../src/collections/collection.js';
import { assertBefore, RawPeer, startServer, type Message, type TestServer } from './helpers.js';
import { eventually } from './processes.js';

describe('handshake', () => {
  let t: TestServer;
  before(async () => {
    t = await startServer((server) => {
      server.methods({ echo: (...args: unknown[]) => args });
    });
  });
  after(() => t.close());

  it('answers connect with connected and a session id, for each supported version', async () => {
    for (const version of ['1', 'pre2', 'pre1']) {
      const peer = await RawPeer.open(t.wsUrl);
      peer.send({ msg: 'connect', version, support: ['1', 'pre2', 'pre1'].filter((v) => v === version || version === '1') });
      const m = await peer.next();
      assert.equal(m.msg, 'connected');
      assert.match(m.session as string, /^[23456789A-Za-z]{17}$/);
      peer.close();
    }
  });

  it('sends failed with the version to use, then closes, ignoring pipelined messages', async () => {
    const peer = await RawPeer.open(t.wsUrl);
    peer.send({ msg: 'connect', version: 'pre2', support: ['1', 'pre2'] });
    peer.send({ msg: 'method', id: '1', method: 'echo', params: [] });
    const m = await peer.next();
    assert.deepEqual(m, { msg: 'failed', version: '1' });
    await peer.waitClosed();
    assert.equal(peer.received.length, 1);
  });

  it('fails connects whose version is not in its own support list or is unknown', async () => {
    for (const connect of [
      { msg: 'connect', version: '1', support: ['pre1'] },
      { msg: 'connect', version: '7', support: ['7'] },
      { msg: 'connect', version: 1, support: ['1'] },
      { msg: 'connect' },
    ]) {
      const peer = await RawPeer.open(t.wsUrl);
      peer.send(connect);
      assert.deepEqual(await peer.next(), { msg: 'failed', version: '1' });
      await peer.waitClosed();
    }
  });

  it('starts a new session when the client names an unknown old one', async () => {
    const peer = await RawPeer.open(t.wsUrl);
    peer.send({ msg: 'connect', version: '1', support: ['1'], session: 'doesNotExist12345' });
    const m = await peer.next();
    assert.equal(m.msg, 'connected');
    assert.notEqual(m.session, 'doesNotExist12345');
    peer.close();
  });

  it('refuses messages before connect and a second connect, keeping the socket open', async () => {
    const peer = await RawPeer.open(t.wsUrl);
    peer.send({ msg: 'method', id: '1', method: 'echo', params: [] });
    assert.equal((await peer.next()).reason, 'Must connect first');
    peer.send({ msg: 'sub', id: 1 });
    assert.equal((await peer.next()).reason, 'Must connect first');
    peer.send({ msg: 'connect', version: '1', support: ['1'] });
    assert.equal((await peer.next()).msg, 'connected');
    peer.send({ msg: 'connect', version: '1', support: ['1'] });
    const again = await peer.next();
    assert.equal(again.msg, 'error');
    assert.equal(again.reason, 'Already connected');
    const { result } = await peer.call('2', 'echo', [1]);
    assert.deepEqual(result.result, [1]);
    peer.close();
  });

  it('serves the raw endpoint at /websocket, /websocket/ and /sockjs/websocket, with a query string', async () => {
    for (const path of ['/websocket/', '/sockjs/websocket', '/websocket?x=1']) {
      const peer = await RawPeer.connected(`ws://127.0.0.1:${t.port}${path}`);
      assert.match(peer.session, /^[23456789A-HJ-NP-Za-km-z]{17}$/, path);
      peer.send({ msg: 'ping', id: path });
      assert.deepEqual(await peer.next((m) => m.msg === 'pong'), { msg: 'pong', id: path });
      peer.close();
    }
  });
});

describe('heartbeats', () => {
  let t: TestServer;
  before(async () => {
    t = await startServer(() => undefined, { heartbeatInterval: 100, heartbeatTimeout: 150 });
  });
  after(() => t.close());

  it('answers ping with pong, echoing the id, outside the message queue', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'ping', id: 'abc' });
    assert.deepEqual(await peer.next((m) => m.msg === 'pong'), { msg: 'pong', id: 'abc' });
    peer.send({ msg: 'ping' });
    assert.deepEqual(await peer.next((m) => m.msg === 'pong'), { msg: 'pong' });
    peer.close();
  });

  it('pings a silent client and closes it when nothing comes back', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    assert.deepEqual(await peer.next((m) => m.msg === 'ping', 2000), { msg: 'ping' });
    await peer.waitClosed(2000);
  });

  it('keeps a client that answers, and counts any message as liveness', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    const until = Date.now() + 700;
    while (Date.now() < until) {
      peer.send({ msg: 'pong' });
      await new Promise((r) => setTimeout(r, 40));
    }
    assert.equal(peer.closed, undefined);
    peer.close();
  });

  it('has no heartbeats for pre1, where ping is an unknown message', async () => {
    const peer = await RawPeer.connected(t.wsUrl, 'pre1');
    // A silent version-1 client opened after it is pinged and dropped: by then pre1 would have been too.
    const witness = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'ping' });
    assert.equal((await peer.next()).reason, 'Bad request');
    await witness.waitClosed(2000);
    assert.equal(peer.closed, undefined);
    assert.deepEqual(peer.received.filter((m) => m.msg === 'ping'), [], 'no ping sent to pre1');
    peer.close();
  });
});

describe('methods', () => {
  let t: TestServer;
  let items: Collection;
  const order: string[] = [];
  /** Methods `held` and `heldUnblocked` wait here until the test releases them: no timing involved. */
  const gates = new Map<string, () => void>();
  const started = (name: string) => eventually(() => order.includes(`${name}:start`), `${name} to start`);
  before(async () => {
    t = await startServer((server, { collection }) => {
      items = collection('items');
      server.methods({
        echo: (...args: unknown[]) => args,
        nothing: () => undefined,
        fail: () => {
          throw new DDPError('not-allowed', 'You may not', { why: 'test' });
        },
        crash: () => {
          throw new Error('secret internals');
        },
        async held(name: unknown) {
          order.push(`${name}:start`);
          await new Promise<void>((release) => gates.set(name as string, release));
          order.push(`${name}:end`);
        },
        async heldUnblocked(this: { unblock(): void }, name: unknown) {
          this.unblock();
          order.push(`${name}:start`);
          await new Promise<void>((release) => gates.set(name as string, release));
          order.push(`${name}:end`);
        },
        fast: () => {
          order.push('fast');
        },
        insert: (doc: unknown) => items.insertAsync(doc as object),
        whoAmI(this: { userId: string | null; isSimulation: boolean; connection: { id: string }; randomSeed?: string }) {
          return { userId: this.userId, isSimulation: this.isSimulation, connectionId: this.connection.id, seed: this.randomSeed ?? null };
        },
        async login(this: { setUserId(id: string | null): Promise<void> }, id: unknown) {
          await this.setUserId(id as string);
        },
      });
    });
  });
  after(() => t.close());

  it('returns results with EJSON values, then updated', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    const { result, all } = await peer.call('1', 'echo', [{ $date: 5 }, { a: [1, { $InfNaN: -1 }] }, { $escape: { $date: 'x' } }]);
    assert.deepEqual(result.result, [{ $date: 5 }, { a: [1, { $InfNaN: -1 }] }, { $escape: { $date: 'x' } }]);
    assert.deepEqual(all.map((m) => m.msg), ['result', 'updated']);
    peer.close();
  });

  it('omits result when the method returns undefined', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    const { result } = await peer.call('1', 'nothing');
    assert.deepEqual(result, { msg: 'result', id: '1' });
    peer.close();
  });

  it('reports unknown methods as 404 and still sends updated', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    const { result } = await peer.call('7', 'nope');
    assert.deepEqual(result.error, {
      isClientSafe: true,
      error: 404,
      reason: "Method 'nope' not found",
      message: "Method 'nope' not found [404]",
      errorType: 'Meteor.Error',
    });
    peer.close();
  });

  it('sends client-safe errors as they are and other exceptions as a sanitised 500', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    const failed = await peer.call('1', 'fail');
    assert.deepEqual(failed.result.error, {
      isClientSafe: true,
      error: 'not-allowed',
      reason: 'You may not',
      details: { why: 'test' },
      message: 'You may not [not-allowed]',
      errorType: 'Meteor.Error',
    });
    const crashed = await peer.call('2', 'crash');
    assert.deepEqual(crashed.result.error, {
      isClientSafe: true,
      error: 500,
      reason: 'Internal server error',
      message: 'Internal server error [500]',
      errorType: 'Meteor.Error',
    });
    assert.ok(!JSON.stringify(crashed.result).includes('secret'));
    peer.close();
  });

  it('runs one connection\'s methods in order, unless a method unblocks', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    order.length = 0;
    peer.send({ msg: 'method', id: '1', method: 'held', params: ['h'] });
    peer.send({ msg: 'method', id: '2', method: 'fast', params: [] });
    // Pings are answered outside the method queue: the pong says the server has read the call behind.
    peer.send({ msg: 'ping', id: 'read' });
    await peer.next((m) => m.msg === 'pong');
    await started('h');
    assert.deepEqual(order, ['h:start'], 'the next call waits for the one before');
    gates.get('h')!();
    await peer.next((m) => m.msg === 'result' && m.id === '2');
    assert.deepEqual(order, ['h:start', 'h:end', 'fast']);
    order.length = 0;
    peer.send({ msg: 'method', id: '3', method: 'heldUnblocked', params: ['u'] });
    peer.send({ msg: 'method', id: '4', method: 'fast', params: [] });
    await peer.next((m) => m.msg === 'result' && m.id === '4');
    assert.deepEqual(order, ['u:start', 'fast'], 'an unblocked call lets the next one run');
    gates.get('u')!();
    await peer.next((m) => m.msg === 'result' && m.id === '3');
    assert.deepEqual(order, ['u:start', 'fast', 'u:end']);
    peer.close();
  });

  it('runs different connections independently', async () => {
    const a = await RawPeer.connected(t.wsUrl);
    const b = await RawPeer.connected(t.wsUrl);
    order.length = 0;
    a.send({ msg: 'method', id: '1', method: 'held', params: ['a'] });
    await started('a');
    await b.call('1', 'fast');
    assert.deepEqual(order, ['a:start', 'fast']);
    gates.get('a')!();
    await a.next((m) => m.msg === 'result');
    assert.deepEqual(order, ['a:start', 'fast', 'a:end']);
    a.close();
    b.close();
  });

  it('gives a method this.userId, this.connection, isSimulation=false and the random seed', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    const { result } = await peer.call('1', 'whoAmI', [], { randomSeed: 'abcdef0123456789abcd' });
    assert.deepEqual(result.result, { userId: null, isSimulation: false, connectionId: peer.session, seed: 'abcdef0123456789abcd' });
    await peer.call('2', 'login', ['user-1']);
    const again = await peer.call('3', 'whoAmI');
    assert.equal((again.result.result as Message).userId, 'user-1');
    peer.close();
  });

  it('inserts with the id the client predicts from randomSeed', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    const seed = '0123456789abcdef0123';
    const predicted = collectionIdSequence(new RandomStream(seed), 'items').id();
    const { result } = await peer.call('1', 'insert', [{ name: 'x' }], { randomSeed: seed });
    assert.equal(result.result, predicted);
    assert.ok(await items.findOneAsync(predicted));
    peer.close();
  });

  it('refuses malformed method messages with Meteor\'s reason', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    for (const bad of [
      { msg: 'method', id: 1, method: 'echo' },
      { msg: 'method', id: '1', method: 5 },
      { msg: 'method', id: '1', method: 'echo', params: 'x' },
      { msg: 'method', id: '1', method: 'echo', randomSeed: 7 },
    ]) {
      peer.send(bad);
      const m = await peer.next();
      assert.equal(m.reason, 'Malformed method invocation');
      assert.deepEqual(m.offendingMessage, bad);
    }
    peer.close();
  });
});

describe('publications', () => {
  let t: TestServer;
  let items: Collection;
  let fenced: Collection;
  let stops = 0;
  before(async () => {
    t = await startServer((server, { collection }) => {
      items = collection('pubitems');
      fenced = collection('fenced');
      server.publish('all', () => items.find());
      server.publish('byColor', (color: unknown) => items.find({ color }, { fields: { color: 1, name: 1 } }));
      server.publish('sizes', () => items.find({}, { fields: { size: 1 } }));
      server.publish('manual', function () {
        this.added('manual', 'a', { x: 1, when: new Date(3) });
        this.added('manual', 'b', { x: 2 });
        this.ready();
        this.changed('manual', 'a', { x: 5, when: undefined });
        this.removed('manual', 'b');
        this.onStop(() => {
          stops++;
        });
      });
      server.publish('manualError', function () {
        this.added('manual', 'z', { x: 1 });
        this.error(new DDPError('denied', 'No access'));
      });
      server.publish('throws', () => {
        throw new Error('hidden');
      });
      server.publish('selfStop', function () {
        this.ready();
        setTimeout(() => this.stop(), 20);
      });
      server.publish('badReturn', () => 42);
      // By hand, a document a cursor may already publish, with a field of its own.
      server.publish('manualOverlap', function (id: unknown) {
        this.added('pubitems', id, { note: 'by hand', name: 'hand' });
        this.ready();
      });
      // Limit without sort: a live query that re-runs its query (throttled) for every change.
      server.publish('requeried', () => fenced.find({}, { limit: 100 }));
      // Meteor makes an array of cursors ready once they are published, an empty one at once (a publication with nothing to show this user).
      server.publish('noCursors', () => []);
      server.publish('twoCursorsOneCollection', () => [fenced.find(), items.find({ color: 'red' }), items.find({ color: 'blue' })]);
      server.publish(null, function () {
        this.added('meta', 'server', { name: 'perseid' });
      });
      server.methods({
        add: (doc: unknown) => items.insertAsync(doc as object),
        set: (id: unknown, fields: unknown) => items.updateAsync(id as string, { $set: fields as object }),
        unset: (id: unknown, field: unknown) => items.updateAsync(id as string, { $unset: { [field as string]: '' } }),
        unsetMany: (id: unknown, fields: unknown) => items.updateAsync(id as string, { $unset: Object.fromEntries((fields as string[]).map((f) => [f, ''])) }),
        remove: (id: unknown) => items.removeAsync(id as string),
        addFenced: (doc: unknown) => fenced.insertAsync(doc as object),
      });
    });
  });
  after(() => t.close());

  it('sends universal publications to every connection, without ready', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    assert.deepEqual(await peer.next((m) => m.collection === 'meta'), { msg: 'added', collection: 'meta', id: 'server', fields: { name: 'perseid' } });
    peer.close();
  });

  it('publishes a cursor: initial adds, ready, then live changes, and removals plus nosub on unsub', async () => {
    await items.insertAsync({ _id: 'p1', color: 'red', name: 'one', size: 1 });
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 's1', name: 'all' });
    const initial = await peer.until((m) => m.msg === 'ready');
    assert.deepEqual(initial.filter((m) => m.collection === 'pubitems'), [
      { msg: 'added', collection: 'pubitems', id: 'p1', fields: { color: 'red', name: 'one', size: 1 } },
    ]);
    assert.deepEqual(initial.at(-1), { msg: 'ready', subs: ['s1'] });

    const { all } = await peer.call('m1', 'set', ['p1', { size: 2, at: { $date: 10 } }]);
    assert.deepEqual(all[0], { msg: 'changed', collection: 'pubitems', id: 'p1', fields: { size: 2, at: { $date: 10 } } });
    const unset = await peer.call('m2', 'unset', ['p1', 'at']);
    assert.deepEqual(unset.all[0], { msg: 'changed', collection: 'pubitems', id: 'p1', cleared: ['at'] });

    peer.send({ msg: 'unsub', id: 's1' });
    const end = await peer.until((m) => m.msg === 'nosub');
    assert.deepEqual(end, [{ msg: 'removed', collection: 'pubitems', id: 'p1' }, { msg: 'nosub', id: 's1' }]);
    await items.removeAsync('p1');
    peer.close();
  });

  it('sends data before updated (the write fence) and result/updated for every write', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 's1', name: 'all' });
    await peer.next((m) => m.msg === 'ready');
    const { all } = await peer.call('m1', 'add', [{ _id: 'f1', color: 'green' }]);
    assertBefore(all, (m) => m.msg === 'added' && m.id === 'f1', (m) => m.msg === 'updated', 'added before updated');
    const removed = await peer.call('m2', 'remove', ['f1']);
    assertBefore(removed.all, (m) => m.msg === 'removed' && m.id === 'f1', (m) => m.msg === 'updated', 'removed before updated');
    peer.close();
  });

  it('holds updated until a live query that re-runs its query has sent the write (the fence really waits)', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 'r', name: 'requeried' });
    await peer.next((m) => m.msg === 'ready');
    for (let i = 0; i < 3; i++) {
      const { all } = await peer.call(`r${i}`, 'addFenced', [{ _id: `q${i}` }]);
      assertBefore(all, (m) => m.msg === 'added' && m.id === `q${i}`, (m) => m.msg === 'updated', `the re-queried q${i} before updated`);
    }
    peer.close();
  });

  it('answers an unknown publication with nosub 404 and any unsub with nosub', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 'x', name: 'nope' });
    assert.deepEqual(await peer.next((m) => m.msg === 'nosub'), {
      msg: 'nosub',
      id: 'x',
      error: { isClientSafe: true, error: 404, reason: "Subscription 'nope' not found", message: "Subscription 'nope' not found [404]", errorType: 'Meteor.Error' },
    });
    peer.send({ msg: 'unsub', id: 'never-subscribed' });
    assert.deepEqual(await peer.next((m) => m.msg === 'nosub'), { msg: 'nosub', id: 'never-subscribed' });
    peer.close();
  });

  it('ignores a sub whose id is already active', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    await items.insertAsync({ _id: 'd1', color: 'red' });
    peer.send({ msg: 'sub', id: 's', name: 'all' });
    await peer.next((m) => m.msg === 'ready');
    peer.send({ msg: 'sub', id: 's', name: 'all' });
    const { all } = await peer.call('m', 'set', ['d1', { name: 'dup' }]);
    assert.equal(all.filter((m) => m.msg === 'added').length, 0);
    assert.equal(all.filter((m) => m.msg === 'ready').length, 0);
    await items.removeAsync('d1');
    peer.close();
  });

  it('supports the low-level API: added, changed with cleared fields, removed, ready, onStop', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 'm', name: 'manual' });
    const messages = (await peer.until((m) => m.msg === 'removed' && m.id === 'b')).filter((m) => m.collection === 'manual' || m.msg === 'ready');
    assert.deepEqual(messages, [
      { msg: 'added', collection: 'manual', id: 'a', fields: { x: 1, when: { $date: 3 } } },
      { msg: 'added', collection: 'manual', id: 'b', fields: { x: 2 } },
      { msg: 'ready', subs: ['m'] },
      { msg: 'changed', collection: 'manual', id: 'a', fields: { x: 5 }, cleared: ['when'] },
      { msg: 'removed', collection: 'manual', id: 'b' },
    ]);
    const before = stops;
    peer.send({ msg: 'unsub', id: 'm' });
    assert.deepEqual(await peer.until((m) => m.msg === 'nosub'), [{ msg: 'removed', collection: 'manual', id: 'a' }, { msg: 'nosub', id: 'm' }]);
    assert.equal(stops, before + 1);
    peer.close();
  });

  it('ends subscriptions with an error, a 500 for exceptions, and by the publication\'s own stop', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 'e', name: 'manualError' });
    const errorEnd = await peer.until((m) => m.msg === 'nosub');
    assert.deepEqual(errorEnd.slice(-2), [
      { msg: 'removed', collection: 'manual', id: 'z' },
      { msg: 'nosub', id: 'e', error: { isClientSafe: true, error: 'denied', reason: 'No access', message: 'No access [denied]', errorType: 'Meteor.Error' } },
    ]);
    peer.send({ msg: 'sub', id: 't', name: 'throws' });
    const thrown = await peer.next((m) => m.msg === 'nosub');
    assert.equal((thrown.error as Message).error, 500);
    peer.send({ msg: 'sub', id: 'b', name: 'badReturn' });
    assert.equal(((await peer.next((m) => m.msg === 'nosub')).error as Message).error, 500);
    const logged: string[] = [];
    setLogLevel('error');
    setLogSink((line) => logged.push(line));
    try {
      peer.send({ msg: 'sub', id: 'two', name: 'twoCursorsOneCollection' });
      assert.equal(((await peer.next((m) => m.msg === 'nosub')).error as Message).error, 500);
    } finally {
      setLogLevel((process.env.PERSEID_LOG_LEVEL as never) ?? 'silent');
      setLogSink((line) => process.stderr.write(line + '\n'));
    }
    // The collection with two cursors, not every collection returned.
    assert.match(logged.join('\n'), /multiple cursors for collection pubitems\b(?!, )/);
    peer.send({ msg: 'sub', id: 'ss', name: 'selfStop' });
    await peer.next((m) => m.msg === 'ready');
    assert.deepEqual(await peer.next((m) => m.msg === 'nosub'), { msg: 'nosub', id: 'ss' });
    peer.close();
  });

  it('makes a publication that returns an empty array of cursors ready, as Meteor does', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 'none', name: 'noCursors' });
    assert.deepEqual(await peer.next((m) => m.msg === 'ready' || m.msg === 'nosub'), { msg: 'ready', subs: ['none'] });
    peer.close();
  });

  it('refuses malformed subscriptions', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    for (const bad of [{ msg: 'sub', id: 1, name: 'all' }, { msg: 'sub', id: '1' }, { msg: 'sub', id: '1', name: 'all', params: {} }]) {
      peer.send(bad);
      assert.equal((await peer.next((m) => m.msg === 'error')).reason, 'Malformed subscription');
    }
    peer.close();
  });

  it('holds the connection\'s queue until a subscription\'s initial data is sent', async () => {
    await items.insertAsync({ _id: 'q1', color: 'red' });
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 's', name: 'all' });
    peer.send({ msg: 'method', id: 'm', method: 'set', params: ['q1', { name: 'after' }] });
    const seq = await peer.until((m) => m.msg === 'updated');
    const kinds = seq.filter((m) => m.id === 'q1' || m.msg === 'ready').map((m) => `${m.msg}`);
    assert.deepEqual(kinds, ['added', 'ready', 'changed']);
    await items.removeAsync('q1');
    peer.close();
  });

  it('merges overlapping subscriptions: one document, fields united, nothing duplicated or dropped', async () => {
    await items.insertAsync({ _id: 'o1', color: 'red', name: 'shared', size: 9 });
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 'a', name: 'byColor', params: ['red'] });
    const first = await peer.until((m) => m.msg === 'ready');
    assert.deepEqual(first.filter((m) => m.id === 'o1'), [{ msg: 'added', collection: 'pubitems', id: 'o1', fields: { color: 'red', name: 'shared' } }]);
    peer.send({ msg: 'sub', id: 'b', name: 'sizes' });
    const second = await peer.until((m) => m.msg === 'ready');
    assert.deepEqual(second.filter((m) => m.id === 'o1'), [{ msg: 'changed', collection: 'pubitems', id: 'o1', fields: { size: 9 } }]);

    // A change of a field only one subscription publishes.
    const sized = await peer.call('m1', 'set', ['o1', { size: 10 }]);
    assert.deepEqual(sized.all.filter((m) => m.id === 'o1'), [{ msg: 'changed', collection: 'pubitems', id: 'o1', fields: { size: 10 } }]);
    // The document leaves one subscription: only that subscription's fields go.
    const recolored = await peer.call('m2', 'set', ['o1', { color: 'blue' }]);
    assert.deepEqual(recolored.all.filter((m) => m.id === 'o1'), [{ msg: 'changed', collection: 'pubitems', id: 'o1', cleared: ['color', 'name'] }]);
    // Unsubscribing the last holder removes it.
    peer.send({ msg: 'unsub', id: 'b' });
    const end = await peer.until((m) => m.msg === 'nosub');
    assert.deepEqual(end.filter((m) => m.id === 'o1'), [{ msg: 'removed', collection: 'pubitems', id: 'o1' }]);
    await items.removeAsync('o1');
    peer.close();
  });

  it('merges a document added by hand with the same document from a cursor', async () => {
    await items.insertAsync({ _id: 'h1', color: 'red', name: 'cursor', size: 3 });
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 'a', name: 'byColor', params: ['red'] });
    await peer.next((m) => m.msg === 'ready');
    peer.send({ msg: 'sub', id: 'b', name: 'manualOverlap', params: ['h1'] });
    const second = await peer.until((m) => m.msg === 'ready');
    // The cursor's subscription came first: its name stays, the hand-added note joins.
    assert.deepEqual(second.filter((m) => m.id === 'h1'), [{ msg: 'changed', collection: 'pubitems', id: 'h1', fields: { note: 'by hand' } }]);
    peer.send({ msg: 'unsub', id: 'a' });
    const end = await peer.until((m) => m.msg === 'nosub');
    assert.deepEqual(end.filter((m) => m.id === 'h1'), [{ msg: 'changed', collection: 'pubitems', id: 'h1', fields: { name: 'hand' }, cleared: ['color'] }]);
    await items.removeAsync('h1');
    peer.close();
  });

  it('sends every field of a multi-field change to a document two subscriptions share', async () => {
    await items.insertAsync({ _id: 'm1', color: 'red', name: 'one', size: 1, gone: 'a', alsoGone: 'b' });
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 'a', name: 'all' });
    await peer.next((m) => m.msg === 'ready');
    peer.send({ msg: 'sub', id: 'b', name: 'byColor', params: ['red'] });
    await peer.next((m) => m.msg === 'ready');
    const from = peer.received.length;
    const ofM1 = (messages: Message[]) => messages.filter((m) => m.id === 'm1');
    // name is published by both subscriptions, size and extra by one: all three must arrive.
    const changed = await peer.call('c1', 'set', ['m1', { name: 'two', size: 2, extra: true }]);
    assert.deepEqual(Object.assign({}, ...ofM1(changed.all).map((m) => m.fields as object)), { name: 'two', size: 2, extra: true });
    const cleared = await peer.call('c2', 'unsetMany', ['m1', ['gone', 'alsoGone', 'name']]);
    assert.deepEqual(ofM1(cleared.all).flatMap((m) => (m.cleared as string[] | undefined) ?? []).sort(), ['alsoGone', 'gone', 'name']);
    // What the client holds after applying every message: the document as stored.
    const view: Record<string, unknown> = { color: 'red', name: 'one', size: 1, gone: 'a', alsoGone: 'b' };
    for (const m of ofM1(peer.received.slice(from))) {
      assert.equal(m.msg, 'changed', JSON.stringify(m));
      Object.assign(view, m.fields ?? {});
      for (const field of (m.cleared as string[] | undefined) ?? []) delete view[field];
    }
    assert.deepEqual(view, { color: 'red', size: 2, extra: true });
    await items.removeAsync('m1');
    peer.close();
  });

  it('sends nothing for the other holders when one of two identical subscriptions stops', async () => {
    await items.insertAsync({ _id: 'i1', color: 'red', name: 'twice' });
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 'a', name: 'byColor', params: ['red'] });
    await peer.next((m) => m.msg === 'ready');
    peer.send({ msg: 'sub', id: 'b', name: 'byColor', params: ['red'] });
    const second = await peer.until((m) => m.msg === 'ready');
    assert.equal(second.filter((m) => m.id === 'i1').length, 0);
    peer.send({ msg: 'unsub', id: 'a' });
    const end = await peer.until((m) => m.msg === 'nosub');
    assert.equal(end.filter((m) => m.id === 'i1').length, 0);
    await items.removeAsync('i1');
    assert.deepEqual(await peer.next((m) => m.id === 'i1'), { msg: 'removed', collection: 'pubitems', id: 'i1' });
    peer.close();
  });

  it('sends a document that arrives while two identical subscriptions hold the query once, and its changes once', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 'a', name: 'byColor', params: ['red'] });
    await peer.next((m) => m.msg === 'ready');
    peer.send({ msg: 'sub', id: 'b', name: 'byColor', params: ['red'] });
    await peer.next((m) => m.msg === 'ready');
    const from = peer.received.length;
    await peer.call('n1', 'add', [{ _id: 'late', color: 'red', name: 'late' }]);
    await peer.call('n2', 'set', ['late', { name: 'later' }]);
    await items.removeAsync('late');
    await peer.next((m) => m.msg === 'removed' && m.id === 'late');
    assert.deepEqual(peer.received.slice(from).filter((m) => m.id === 'late'), [
      { msg: 'added', collection: 'pubitems', id: 'late', fields: { color: 'red', name: 'late' } },
      { msg: 'changed', collection: 'pubitems', id: 'late', fields: { name: 'later' } },
      { msg: 'removed', collection: 'pubitems', id: 'late' },
    ]);
    peer.close();
  });

});

describe('login', () => {
  let t: TestServer;
  let docs: Collection;
  const events: string[] = [];
  const online = new Map<string, string | null>();
  before(async () => {
    t = await startServer((server, { collection }) => {
      docs = collection('secrets');
      server.publish('visible', function () {
        return docs.find(this.userId ? {} : { public: true });
      });
      // Presence as apps keep it: set by the publication, undone by its onStop.
      server.publish('presence', function () {
        const { userId } = this;
        events.push(`run ${userId}`);
        online.set(this.connection.id, userId);
        this.onStop(() => {
          events.push(`stop ${this.userId}`);
          online.delete(this.connection.id);
        });
        this.ready();
      });
      let openGate = () => {};
      server.methods({
        async login(this: { setUserId(id: string | null): Promise<void> }, id: unknown) {
          await this.setUserId(id as string | null);
        },
        // Lets the connection's next calls run, waits for `open`, then says who called it.
        async whoCalled(this: { userId: string | null; unblock(): void }) {
          this.unblock();
          await new Promise<void>((resolve) => (openGate = resolve));
          return this.userId;
        },
        open: () => openGate(),
      });
    });
    await docs.insertAsync({ _id: 'pub', public: true });
    await docs.insertAsync({ _id: 'priv', public: false });
  });
  after(() => t.close());

  it('re-runs subscriptions for the new user and sends only the difference', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 'v', name: 'visible' });
    const initial = await peer.until((m) => m.msg === 'ready');
    assert.deepEqual(initial.filter((m) => m.msg === 'added').map((m) => m.id), ['pub']);
    const login = await peer.call('1', 'login', ['u1']);
    assert.deepEqual(await peer.barrier(), [], 'nothing more after the call');
    const data = peer.received.filter((m) => m.collection === 'secrets').slice(1);
    assert.deepEqual(data, [{ msg: 'added', collection: 'secrets', id: 'priv', fields: { public: false } }]);
    assert.equal(login.all.filter((m) => m.msg === 'ready').length, 0);
    await peer.call('2', 'login', [null]);
    assert.deepEqual(await peer.barrier(), [], 'nothing more after the call');
    assert.deepEqual(peer.received.filter((m) => m.collection === 'secrets').slice(2), [{ msg: 'removed', collection: 'secrets', id: 'priv' }]);
    peer.close();
  });

  it('keeps a running method\'s userId when another call logs the connection in', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'method', id: 'who', method: 'whoCalled', params: [] });
    await peer.call('in', 'login', ['u1']);
    await peer.call('open', 'open');
    // Its answer may come before or after open's.
    const isAnswer = (m: Message) => m.msg === 'result' && m.id === 'who';
    const answer = peer.received.find(isAnswer) ?? (await peer.next(isAnswer));
    assert.equal(answer.result, null, 'it was called logged out');
    peer.close();
  });

  it('stops the old run, with its own userId, before re-running a subscription for the new user', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 'p', name: 'presence' });
    await peer.next((m) => m.msg === 'ready');
    await peer.call('1', 'login', ['u1']);
    assert.deepEqual(events, ['run null', 'stop null', 'run u1']);
    assert.equal(online.get(peer.session), 'u1', 'the old run\'s onStop undid the new run\'s presence');
    peer.close();
  });
});

describe('publication strategies', () => {
  let t: TestServer;
  let notes: Collection;
  let tasks: Collection;
  before(async () => {
    t = await startServer((server, { collection }) => {
      notes = collection('notes');
      server.setPublicationStrategy('notes', 'NO_MERGE_NO_HISTORY');
      server.setPublicationStrategy('events', 'NO_MERGE_NO_HISTORY');
      server.publish('notes', () => notes.find());
      server.publish('events', function () {
        this.added('events', 'e1', { n: 1 });
        this.changed('events', 'e1', { n: 2, gone: undefined });
        this.ready();
      });
      server.setPublicationStrategy('tasks', 'NO_MERGE');
      server.publish('tasks', function () {
        return tasks.find(this.userId ? { owner: this.userId } : {});
      });
      server.methods({
        async login(this: { setUserId(id: string | null): Promise<void> }, id: unknown) {
          await this.setUserId(id as string | null);
        },
      });
    });
    tasks = t.collection('tasks');
  });
  after(() => t.close());

  it('NO_MERGE_NO_HISTORY passes messages through and sends no removals on unsub', async () => {
    await notes.insertAsync({ _id: 'n1', text: 'hi' });
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 'a', name: 'notes' });
    await peer.next((m) => m.msg === 'ready');
    peer.send({ msg: 'unsub', id: 'a' });
    assert.deepEqual(await peer.until((m) => m.msg === 'nosub'), [{ msg: 'nosub', id: 'a' }]);
    peer.send({ msg: 'sub', id: 'e', name: 'events' });
    const events = await peer.until((m) => m.msg === 'ready');
    assert.deepEqual(events, [
      { msg: 'added', collection: 'events', id: 'e1', fields: { n: 1 } },
      { msg: 'changed', collection: 'events', id: 'e1', fields: { n: 2 }, cleared: ['gone'] },
      { msg: 'ready', subs: ['e'] },
    ]);
    peer.close();
  });

  it('NO_MERGE keeps the documents a login re-run publishes again, and removes the others', async () => {
    await tasks.insertAsync({ _id: 'mine', owner: 'u1' });
    await tasks.insertAsync({ _id: 'theirs', owner: 'u2' });
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 't', name: 'tasks' });
    await peer.next((m) => m.msg === 'ready');
    const { all } = await peer.call('1', 'login', ['u1']);
    // Unmerged, the re-run sends its documents again (a client applies an added for a document it has as a change).
    assert.deepEqual(all.filter((m) => m.collection === 'tasks'), [
      { msg: 'added', collection: 'tasks', id: 'mine', fields: { owner: 'u1' } },
      { msg: 'removed', collection: 'tasks', id: 'theirs' },
    ]);
    peer.close();
  });
});

describe('drain', () => {
  it('closes a connection with a method running only once it has answered, and runs nothing that came after', async () => {
    const runs: string[] = [];
    const t = await startServer((server) => {
      server.methods({
        async slow(label: unknown) {
          runs.push(label as string);
          await new Promise((r) => setTimeout(r, 600));
          return `done ${label as string}`;
        },
      });
    });
    const [busy, idle] = await Promise.all([RawPeer.connected(t.wsUrl), RawPeer.connected(t.wsUrl)]);
    busy.send({ msg: 'method', id: 'm1', method: 'slow', params: ['first'] });
    await new Promise((r) => setTimeout(r, 100));
    const draining = t.server.drain(2000);
    busy.send({ msg: 'method', id: 'm2', method: 'slow', params: ['second'] });
    const closed = await busy.waitClosed();
    assert.deepEqual([closed.code, closed.reason], [1001, 'Server draining']);
    const answers = busy.received.filter((m) => m.msg === 'result' || m.msg === 'updated');
    assert.deepEqual(answers, [
      { msg: 'result', id: 'm1', result: 'done first' },
      { msg: 'updated', methods: ['m1'] },
    ]);
    assert.deepEqual(runs, ['first'], 'the call sent during the drain was left for the client to send again elsewhere');
    assert.equal((await idle.waitClosed()).code, 1001);
    await draining;
    await t.close();
  });
});
