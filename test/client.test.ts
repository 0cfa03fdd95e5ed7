import assert from 'node:assert/strict';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  DDPClient,
  DDPError,
  METEOR_BACKOFF,
  ObjectID,
  retryDelay,
  toWebSocketUrl,
  type LocalSelector,
  type ServerMessage,
  type WebSocketConstructor,
} from '../src/client/node.js';
import type * as BrowserClient from '../src/client/index.js';
import { createServer } from '../src/server/app.js';
import { FAST_BACKOFF, Peer, connected, nextEvent, recordChanges, scenario, summary, track, withLimit, type Json } from './client-peer.js';
import { eventually } from './processes.js';

describe('client URLs', () => {
  it('turns site and ws URLs into the WebSocket endpoint', () => {
    assert.equal(toWebSocketUrl('ws://localhost:3000/websocket'), 'ws://localhost:3000/websocket');
    assert.equal(toWebSocketUrl('ws://localhost:3000'), 'ws://localhost:3000/websocket');
    assert.equal(toWebSocketUrl('http://localhost:3000'), 'ws://localhost:3000/websocket');
    assert.equal(toWebSocketUrl('https://example.com/app/'), 'wss://example.com/app/websocket');
    assert.equal(toWebSocketUrl('localhost:3000'), 'ws://localhost:3000/websocket');
    assert.equal(toWebSocketUrl('wss://example.com/ddp?token=1'), 'wss://example.com/ddp?token=1');
    assert.throws(() => toWebSocketUrl('ftp://example.com'), /Unsupported DDP URL/);
  });
});

describe('client reconnect backoff', () => {
  it("computes Meteor's delays: 10 ms twice, then 1000 ms × 2.2^n with ±25 % fuzz, capped", () => {
    const middle = () => 0.5;
    const delays = [0, 1, 2, 3, 4].map((count) => Math.round(retryDelay(count, METEOR_BACKOFF, middle)));
    assert.deepEqual(delays, [10, 10, 4840, 10648, 23426]);
    assert.equal(retryDelay(20, METEOR_BACKOFF, middle), 300000);
    assert.equal(Math.round(retryDelay(2, METEOR_BACKOFF, () => 0)), 3630);
    assert.ok(retryDelay(2, METEOR_BACKOFF, () => 0.999999) < 4840 * 1.25);
  });
});

describe('client handshake', () => {
  it('connects to /websocket of a site URL, proposing version 1, and ignores a server_id greeting', async () => {
    const peer = await Peer.start();
    const client = new DDPClient(`http://127.0.0.1:${peer.port}`, { heartbeatInterval: 0 });
    try {
      assert.equal(client.status, 'connecting');
      const socket = await peer.connection();
      assert.equal(socket.path, '/websocket');
      socket.send({ server_id: '0' });
      const connect = await socket.handshake('abc');
      assert.deepEqual(connect, { msg: 'connect', version: '1', support: ['1', 'pre2', 'pre1'] });
      assert.equal(await client.connect(), 'abc');
      assert.equal(client.status, 'connected');
      assert.equal(client.sessionId, 'abc');
    } finally {
      client.disconnect();
      await peer.close();
    }
    assert.equal(client.status, 'closed');
    assert.equal(client.sessionId, undefined);
  });

  it('refuses an option it does not know, in one line naming the one meant or the options', () => {
    // A misspelt option was dropped without a word: this client would have reloaded pages on a new version.
    const typo = { hotcodepush: 'keep', autoConnect: false } as object;
    assert.throws(() => new DDPClient('ws://127.0.0.1:9', typo), {
      name: 'TypeError',
      message: 'DDPClient: unknown option "hotcodepush" (did you mean hotCodePush?)',
    });
    assert.throws(() => new DDPClient('ws://127.0.0.1:9', { reconnect: false, autoConnect: false } as object), (error: Error) => {
      assert.match(error.message, /^DDPClient: unknown option "reconnect" \(the options are WebSocket, autoConnect, autoReconnect, .*hotCodePush\)$/);
      return true;
    });
    new DDPClient('ws://127.0.0.1:9', { autoConnect: false, hotCodePush: 'keep' }).disconnect();
  });

  it('does nothing until connect() when autoConnect is off', async () => {
    await scenario({ autoConnect: false }, async (peer, client) => {
      assert.equal(client.status, 'idle');
      const session = client.connect();
      await (await peer.connection()).handshake('later');
      assert.equal(await session, 'later');
    });
  });

  it("reconnects proposing the server's version after `failed`", async () => {
    await scenario({}, async (peer, client) => {
      const first = await peer.connection();
      await first.next('connect');
      first.send({ msg: 'failed', version: 'pre2' });
      const second = await peer.connection();
      const connect = await second.handshake('s2');
      assert.deepEqual(connect, { msg: 'connect', version: 'pre2', support: ['1', 'pre2', 'pre1'] });
      assert.equal(await client.connect(), 's2');
    });
  });

  it('gives up when the server wants a version the client does not offer', async () => {
    await scenario({}, async (peer, client) => {
      const errors: Error[] = [];
      client.on('error', (error) => errors.push(error));
      const socket = await peer.connection();
      await socket.next('connect');
      socket.send({ msg: 'failed', version: '2' });
      await assert.rejects(client.connect(), (error: DDPError) => error.error === 'version-mismatch');
      assert.equal(client.status, 'closed');
      assert.equal((errors[0] as DDPError | undefined)?.error, 'version-mismatch');
    });
  });

  it('abandons an attempt that gets no `connected` in time, and tries again', async () => {
    await scenario({ connectTimeout: 100 }, async (peer, client) => {
      // Leave attempts unanswered until one has said `connect` (on a loaded machine an attempt
      // may be abandoned before its socket even opens): the client must give that one up too.
      for (let attempts = 1; !(await (await peer.connection()).saysConnect()); attempts++) {
        assert.ok(attempts < 20, 'no attempt said connect');
      }
      const next = await peer.connection();
      await next.handshake('s2');
      assert.equal(await client.connect(), 's2');
    });
  });
});

describe('client methods', () => {
  it('settles a call only once both result and updated arrived, in either order', async () => {
    await connected({}, async (socket, client) => {
      const first = client.call('first', 1, { at: new Date(0) });
      const firstState = track(first);
      const method = await socket.next('method');
      assert.deepEqual(method, { msg: 'method', id: '1', method: 'first', params: [1, { at: { $date: 0 } }] });
      socket.send({ msg: 'result', id: '1', result: { at: { $date: 5 } } });
      await socket.sync();
      assert.equal(firstState.settled, false);
      socket.send({ msg: 'updated', methods: ['1'] });
      assert.deepEqual(await first, { at: new Date(5) });

      const second = client.call('second');
      const secondState = track(second);
      assert.equal((await socket.next('method')).id, '2');
      socket.send({ msg: 'updated', methods: ['2'] });
      await socket.sync();
      assert.equal(secondState.settled, false);
      socket.send({ msg: 'result', id: '2' });
      assert.equal(await second, undefined);
    });
  });

  it("tells onResultReceived the result or error as it arrives, before the call settles on `updated`", async () => {
    await connected({}, async (socket, client) => {
      const received: unknown[] = [];
      const done = client.apply('done', [], { onResultReceived: (error, result) => received.push([error?.reason, result]) });
      const doneState = track(done);
      const refused = client.apply('refused', [], { onResultReceived: (error, result) => received.push([error?.reason, result]) });
      const refusedState = track(refused);
      await socket.next('method');
      await socket.next('method');
      socket.send({ msg: 'result', id: '1', result: 7 });
      socket.send({ msg: 'result', id: '2', error: { error: 403, reason: 'No', errorType: 'Meteor.Error' } });
      await socket.sync();
      assert.deepEqual(received, [[undefined, 7], ['No', undefined]]);
      assert.equal(doneState.settled || refusedState.settled, false, 'the calls wait for their updated');
      socket.send({ msg: 'updated', methods: ['1', '2'] });
      assert.equal(await done, 7);
      await assert.rejects(refused, { reason: 'No' });
    });
  });

  it("rejects with the server's error as a DDPError", async () => {
    await connected({}, async (socket, client) => {
      const call = client.call('guarded');
      await socket.next('method');
      socket.send({
        msg: 'result',
        id: '1',
        error: {
          isClientSafe: true,
          error: 'not-allowed',
          reason: 'Nope',
          details: { why: 1 },
          message: 'Nope [not-allowed]',
          errorType: 'Meteor.Error',
        },
      });
      socket.send({ msg: 'updated', methods: ['1'] });
      await assert.rejects(call, (error) => {
        assert.ok(error instanceof DDPError);
        assert.equal(error.error, 'not-allowed');
        assert.equal(error.reason, 'Nope');
        assert.deepEqual(error.details, { why: 1 });
        assert.equal(error.message, 'Nope [not-allowed]');
        return true;
      });
    });
  });

  it('refuses a call option it does not know before running the stub or sending the call', async () => {
    await connected({}, async (socket, client) => {
      let stubRuns = 0;
      client.methods({ once: () => void stubRuns++ });
      // A misspelt noRetry was dropped without a word: the call was sent again after a reconnect, and ran twice.
      assert.throws(() => client.apply('once', [], { noretry: true } as object), {
        name: 'TypeError',
        message: 'apply: unknown option "noretry" (did you mean noRetry?)',
      });
      // Meteor's returnStubValue, which this client does not have: the promise resolved with the server's result instead.
      assert.throws(() => client.apply('once', [], { returnStubValue: true } as object), {
        message: 'apply: unknown option "returnStubValue" (the options are randomSeed, noRetry, wait, throwStubExceptions, onResultReceived)',
      });
      assert.equal(stubRuns, 0);
      const call = client.apply('once', [], { noRetry: true });
      assert.equal((await socket.next('method')).id, '1', 'the refused calls were not sent');
      socket.send({ msg: 'result', id: '1', result: 'ok' });
      socket.send({ msg: 'updated', methods: ['1'] });
      assert.equal(await call, 'ok');
    });
  });

  it('sends the randomSeed a caller passes', async () => {
    await connected({}, async (socket, client) => {
      const call = client.apply('insertTask', [{ title: 'a' }], { randomSeed: '0123456789abcdef0123' });
      const method = await socket.next('method');
      assert.equal(method.randomSeed, '0123456789abcdef0123');
      socket.send({ msg: 'updated', methods: ['1'] });
      socket.send({ msg: 'result', id: '1', result: 'ok' });
      assert.equal(await call, 'ok');
    });
  });

  it('re-sends unanswered calls after a reconnect, fails noRetry ones, and completes half-answered ones', async () => {
    await connected({}, async (first, client, peer) => {
      const unanswered = client.call('unanswered', 1);
      const heard: unknown[] = [];
      // Meteor tells onResultReceived of a noRetry call's failure too: a page hides its spinner there.
      const once = client.apply('once', [], { noRetry: true, onResultReceived: (error) => heard.push(error?.error) });
      const half = client.call('half');
      for (let i = 0; i < 3; i++) await first.next('method');
      first.send({ msg: 'result', id: '3', result: 'half done' });
      await first.sync();
      const disconnected = nextEvent(client, 'disconnected');
      first.drop();
      const [info] = await disconnected;
      assert.equal(info.willReconnect, true);
      await assert.rejects(once, (error: DDPError) => error.error === 'invocation-failed');
      assert.deepEqual(heard, ['invocation-failed']);
      const queued = client.call('queued');

      const second = await peer.connection();
      await second.handshake('session-2');
      const resent = await second.next('method');
      assert.deepEqual(resent, { msg: 'method', id: '1', method: 'unanswered', params: [1] });
      assert.equal((await second.next('method')).id, '4');
      await second.sync();
      assert.deepEqual(
        second.received.filter((message) => message.msg === 'method').map((message) => message.id),
        ['1', '4'],
      );
      const halfState = track(half);
      second.send({ msg: 'result', id: '1', result: 'one' });
      second.send({ msg: 'result', id: '4', result: 'four' });
      second.send({ msg: 'updated', methods: ['4'] });
      await second.sync();
      // The half-answered call waits until the new session's data is in (here: call 1's writes).
      assert.equal(halfState.settled, false);
      second.send({ msg: 'updated', methods: ['1'] });
      assert.equal(await unanswered, 'one');
      assert.equal(await queued, 'four');
      assert.equal(await half, 'half done');
    });
  });

  it('fails outstanding calls on disconnect(), and calls made while closed', async () => {
    await connected({}, async (socket, client) => {
      const call = client.call('slow');
      await socket.next('method');
      client.disconnect();
      await assert.rejects(call, (error: DDPError) => error.error === 'disconnected');
      await assert.rejects(client.call('late'), (error: DDPError) => error.error === 'disconnected');
    });
  });
});

describe('client subscriptions', () => {
  it('sends subscriptions made before connecting, is ready after the data, and unsubscribes on stop', async () => {
    await scenario({}, async (peer, client) => {
      const tasks = client.subscribe('tasks', 'open', { limit: 2 });
      const socket = await peer.connection();
      await socket.handshake();
      const sub = await socket.next('sub');
      assert.deepEqual(sub, { msg: 'sub', id: tasks.id, name: 'tasks', params: ['open', { limit: 2 }] });
      socket.send({ msg: 'added', collection: 'tasks', id: 'a', fields: { title: 'A' } });
      socket.send({ msg: 'ready', subs: [tasks.id] });
      await tasks.ready;
      assert.equal(tasks.isReady, true);
      assert.equal(client.collection('tasks').size, 1);

      const stops: unknown[] = [];
      tasks.onStop((error) => stops.push(error));
      tasks.stop();
      assert.deepEqual(await socket.next('unsub'), { msg: 'unsub', id: tasks.id });
      assert.deepEqual(stops, [undefined]);
      assert.equal(tasks.isStopped, true);
      // The server's nosub for it is expected and changes nothing.
      socket.send({ msg: 'nosub', id: tasks.id });
      await socket.sync();
      assert.deepEqual(stops, [undefined]);
    });
  });

  it("rejects ready with the server's error when nosub comes first, and reports nosub after ready", async () => {
    await connected({}, async (socket, client) => {
      const secret = client.subscribe('secret');
      const open = client.subscribe('open');
      const secretStops: (DDPError | undefined)[] = [];
      const openStops: (DDPError | undefined)[] = [];
      secret.onStop((error) => secretStops.push(error));
      open.onStop((error) => openStops.push(error));
      await socket.next('sub');
      await socket.next('sub');
      const error = {
        isClientSafe: true,
        error: 403,
        reason: 'Forbidden',
        message: 'Forbidden [403]',
        errorType: 'Meteor.Error',
      };
      socket.send({ msg: 'nosub', id: secret.id, error });
      socket.send({ msg: 'ready', subs: [open.id] });
      await assert.rejects(secret.ready, (rejection) => rejection instanceof DDPError && rejection.error === 403);
      await open.ready;
      assert.equal(secretStops[0]?.reason, 'Forbidden');
      assert.equal(secret.isStopped, true);

      socket.send({ msg: 'nosub', id: open.id });
      await socket.sync();
      assert.deepEqual(openStops, [undefined]);
      let late: unknown = 'not called';
      open.onStop((stopError) => (late = stopError));
      assert.equal(late, undefined);
    });
  });
});

describe("client: Meteor's trailing callbacks", () => {
  // Code ported from Meteor passes them; they were sent as parameters (a function as null, an object as {}) and never called.
  it('calls a method callback with (error, result), and does not send it', async () => {
    await connected({}, async (socket, client) => {
      const outcomes: unknown[] = [];
      void client.call('add', 1, 2, (error: unknown, result: unknown) => outcomes.push(['call', error, result]));
      void client.apply('fail', [3], { wait: true }, (error: unknown) => outcomes.push(['apply', (error as DDPError).error]));
      void client.apply('bare', [], (error: unknown, result: unknown) => outcomes.push(['apply without options', error, result]));
      const add = await socket.next('method');
      socket.send({ msg: 'result', id: add.id, result: 3 });
      socket.send({ msg: 'updated', methods: [add.id] });
      const fail = await socket.next('method'); // a wait call: sent once the one before it finished
      assert.deepEqual([add.params, fail.params], [[1, 2], [3]]);
      socket.send({ msg: 'result', id: fail.id, error: { error: 403, reason: 'no', errorType: 'Meteor.Error' } });
      socket.send({ msg: 'updated', methods: [fail.id] });
      const bare = await socket.next('method');
      assert.deepEqual(bare.params, []);
      socket.send({ msg: 'result', id: bare.id, result: 'ok' });
      socket.send({ msg: 'updated', methods: [bare.id] });
      await eventually(() => outcomes.length === 3, 'the three callbacks', 2000);
      assert.deepEqual(outcomes, [['call', undefined, 3], ['apply', 403], ['apply without options', undefined, 'ok']]);
    });
  });

  it('calls onReady, onStop and onError given after the parameters, and does not send them', async () => {
    await connected({}, async (socket, client) => {
      const heard: unknown[] = [];
      const open = client.subscribe('open', 'x', () => heard.push('open ready'));
      const secret = client.subscribe('secret', {
        onReady: () => heard.push('secret ready'),
        onError: (error: DDPError) => heard.push(`secret error ${String(error.error)}`),
        onStop: (error?: DDPError) => heard.push(`secret stop ${String(error?.error)}`),
      });
      const plain = client.subscribe('plain', { onStop: () => heard.push('plain stop') });
      const subs = [await socket.next('sub'), await socket.next('sub'), await socket.next('sub')];
      assert.deepEqual(subs.map((m) => m.params), [['x'], [], []]);
      socket.send({ msg: 'ready', subs: [open.id] });
      socket.send({ msg: 'nosub', id: secret.id, error: { error: 403, reason: 'Forbidden', errorType: 'Meteor.Error' } });
      await open.ready;
      await secret.ready.catch(() => undefined);
      plain.stop();
      await eventually(() => heard.length === 4, 'the callbacks', 2000);
      assert.deepEqual(heard.toSorted(), ['open ready', 'plain stop', 'secret error 403', 'secret stop 403']);
      assert.ok(heard.indexOf('secret error 403') < heard.indexOf('secret stop 403'), 'onError, then onStop');
    });
  });
});

describe('client local store', () => {
  it("merges added, changed and removed with Meteor's tolerance, clearing fields", async () => {
    await connected({}, async (socket, client) => {
      const changes = recordChanges(client, 'tasks');
      const messages: ServerMessage[] = [];
      client.on('message', (message) => messages.push(message));
      const send = (message: Json) => socket.send({ collection: 'tasks', ...message });
      send({ msg: 'added', id: 'a', fields: { title: 'A', done: false, tags: ['x'], at: { $date: 1 } } });
      send({ msg: 'changed', id: 'a', fields: { done: true }, cleared: ['tags'] });
      send({ msg: 'changed', id: 'a', fields: { done: true } }); // no change, no event
      send({ msg: 'added', id: 'a', fields: { title: 'A2' } }); // known: a change
      send({ msg: 'changed', id: 'b', fields: { title: 'B' } }); // unknown: an add
      send({ msg: 'removed', id: 'nobody' }); // unknown: ignored
      send({ msg: 'removed', id: 'b' });
      send({ msg: 'added', id: '0123456789abcdef01234567', fields: { kind: 'oid' } });
      send({ msg: 'added', id: '~5', fields: { kind: 'number' } });
      await socket.sync();

      assert.deepEqual(summary(changes), [
        ['added', 'a'],
        ['changed', 'a', { done: true, tags: undefined }],
        ['changed', 'a', { title: 'A2' }],
        ['added', 'b'],
        ['removed', 'b'],
        ['added', '0123456789abcdef01234567'],
        ['added', '~5'],
      ]);
      const firstChange = changes[1];
      assert.equal(firstChange?.type, 'changed');
      assert.deepEqual(firstChange.previous, { _id: 'a', title: 'A', done: false, tags: ['x'], at: new Date(1) });

      interface Task {
        _id: unknown;
        title?: string;
        done?: boolean;
        kind?: string;
      }
      const tasks = client.collection<Task>('tasks');
      assert.equal(tasks.size, 3);
      assert.deepEqual(tasks.findOne('a'), { _id: 'a', title: 'A2', done: true, at: new Date(1) });
      assert.equal(tasks.findOne(5)?.kind, 'number');
      const oid = tasks.findOne(new ObjectID('0123456789abcdef01234567'));
      assert.ok(oid?._id instanceof ObjectID);
      assert.equal(tasks.findOne((doc) => doc.kind === 'oid'), oid);
      assert.deepEqual(
        tasks.find((doc) => doc.kind !== undefined).map((doc) => doc.kind),
        ['oid', 'number'],
      );
      assert.equal(messages.filter((message) => message.msg !== 'ping').length, 9);
    });
  });
});

describe('client buffered writes', () => {
  it("refreshes a local query a few times, not once per document, for a subscription's burst of added", async () => {
    await connected({}, async (socket, client) => {
      const count = 1000;
      const items = client.subscribe('items');
      const { id } = await socket.next('sub');
      let refreshes = 0;
      const watch = client.collection<{ _id: string; n: number }>('items').cursor({}, { sort: { n: -1 } }).watch(() => refreshes++);
      for (let n = 0; n < count; n++) socket.send({ msg: 'added', collection: 'items', id: `i${n}`, fields: { n } });
      socket.send({ msg: 'ready', subs: [id] });
      await items.ready;
      assert.equal(watch.results.length, count, 'the query is current once the subscription is ready');
      assert.equal(client.collection('items').size, count);
      assert.ok(refreshes < count / 20, `${refreshes} refreshes for ${count} documents`);
      // A stub's write shows at once, even right behind server writes still buffered.
      client.methods({ drop: () => client.collection('items').remove('i0') });
      const stubbed = new Promise<{ call: Promise<unknown>; shown: number }>((resolve) => {
        const off = client.on('message', (message) => {
          if (message.msg !== 'removed') return;
          off();
          // Right after the client took the message in, with the refresh it buffered still pending.
          queueMicrotask(() => {
            const call = client.call('drop');
            resolve({ call, shown: watch.results.length });
          });
        });
      });
      socket.send({ msg: 'removed', collection: 'items', id: 'i1' });
      const { call, shown } = await stubbed;
      assert.equal(shown, count - 2, 'the buffered removal and the stub removal both shown');
      const method = await socket.next('method');
      socket.send({ msg: 'result', id: method.id });
      socket.send({ msg: 'updated', methods: [method.id] });
      await call;
      assert.equal(watch.results.length, count - 1, "the stub's removal undone: the server did not remove i0");
      watch.stop();
    });
  });
});

describe('client reconnect', () => {
  it('keeps retrying, with backoff, while the server is unreachable', async () => {
    const peer = await Peer.start();
    const { port } = peer;
    await peer.close();
    const client = new DDPClient(`ws://127.0.0.1:${port}`, { heartbeatInterval: 0, backoff: FAST_BACKOFF });
    const statuses: string[] = [];
    client.on('status', (status) => statuses.push(status));
    client.on('error', () => undefined);
    let revived: Peer | undefined;
    try {
      await withLimit(
        new Promise<void>((resolve) => client.on('status', () => statuses.length >= 4 && resolve())),
        'retries',
      );
      assert.deepEqual(statuses.slice(0, 4), ['waiting', 'connecting', 'waiting', 'connecting']);
      revived = await Peer.start(port);
      await (await revived.connection()).handshake('back');
      assert.equal(await client.connect(), 'back');
    } finally {
      client.disconnect();
      await revived?.close();
    }
  });

  it('comes back within a moment of a server that closed saying it restarts (1012, perseid dev), instead of backing off', async () => {
    const first = createServer();
    first.methods({ who: () => 'first' });
    const { port } = await first.listen(0, '127.0.0.1');
    // Meteor's backoff: two quick tries, then the third ~5 s later.
    const client = new DDPClient(`ws://127.0.0.1:${port}`, { heartbeatInterval: 0 });
    client.on('error', () => undefined);
    let second: ReturnType<typeof createServer> | undefined;
    try {
      await client.connect();
      const lost = nextEvent(client, 'disconnected');
      await first.close({ restarting: true });
      const [info] = await lost;
      assert.equal(info.code, 1012);
      await new Promise((r) => setTimeout(r, 1000));
      second = createServer();
      second.methods({ who: () => 'second' });
      await second.listen(port, '127.0.0.1');
      const back = performance.now();
      while (client.status !== 'connected') await new Promise((r) => setTimeout(r, 20));
      assert.ok(performance.now() - back < 1000, `back ${Math.round(performance.now() - back)} ms after the server`);
      assert.equal(await client.call('who'), 'second');
    } finally {
      client.disconnect();
      await second?.close();
    }
  });

  it('reloads the page for a new version only once no call is outstanding: a call queued during the restart is not lost', async () => {
    const first = createServer({ clientVersion: 'v1' });
    const { port } = await first.listen(0, '127.0.0.1');
    const reloads: string[] = [];
    const location = Object.getOwnPropertyDescriptor(globalThis, 'location');
    // What hotCodePush 'reload' reloads in a page.
    Object.defineProperty(globalThis, 'location', { configurable: true, value: { reload: () => reloads.push(client.status) } });
    const client = new DDPClient(`ws://127.0.0.1:${port}`, { heartbeatInterval: 0, hotCodePush: 'reload' });
    client.on('error', () => undefined);
    const version = () => client.collection<{ version: string }>('perseid_autoupdate').findOne('version')?.version;
    let second: ReturnType<typeof createServer> | undefined;
    let release = () => undefined as void;
    try {
      await client.connect();
      await eventually(() => version() === 'v1', 'the first version');
      await first.close({ restarting: true });
      // Made while the server restarts, as a page's login resume (a wait call) and a message typed meanwhile.
      const resumed = client.apply('resume', [], { wait: true });
      const sent = client.call('send', 'typed during the restart');
      sent.catch(() => undefined); // awaited below; a failed assertion disconnects first
      second = createServer({ clientVersion: 'v2' });
      const held = new Promise<void>((resolve) => (release = resolve));
      const received: unknown[] = [];
      second.methods({
        resume: () => 'resumed',
        async send(text: unknown) {
          received.push(text);
          await held;
          return 'stored';
        },
      });
      await second.listen(port, '127.0.0.1');
      assert.equal(await resumed, 'resumed');
      await eventually(() => received.length === 1, 'the message reaching the new server');
      await eventually(() => version() === 'v2', 'the new version');
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual(reloads, [], 'no reload while the message has no answer');
      release();
      assert.equal(await sent, 'stored');
      await eventually(() => reloads.length === 1, 'the reload');
    } finally {
      release();
      client.disconnect();
      await first.close();
      await second?.close();
      if (location) Object.defineProperty(globalThis, 'location', location);
      else Reflect.deleteProperty(globalThis, 'location');
    }
  });

  it('fails connect() when the connection is lost and autoReconnect is off', async () => {
    const peer = await Peer.start();
    const { port } = peer;
    await peer.close();
    const client = new DDPClient(`ws://127.0.0.1:${port}`, { autoReconnect: false });
    client.on('error', () => undefined);
    await assert.rejects(client.connect(), (error: DDPError) => error.error === 'connection-lost');
    assert.equal(client.status, 'closed');
  });

  it("resumes past a wait call whose `updated` came before the cut and its result after: later data is not held for ever", async () => {
    await connected({}, async (first, client, peer) => {
      const login = client.apply('login', [], { wait: true });
      const method = await first.next('method');
      // Meteor's server sends `updated` first (its write fence fires before the result goes); the cut loses the result.
      first.send({ msg: 'updated', methods: [method.id] });
      await first.sync();
      first.drop();
      const second = await peer.connection();
      const connect = await second.handshake('session-1');
      assert.equal(connect.session, 'session-1');
      // The client sends the call again; a resumed session has answered it already and only replays the result.
      second.send({ msg: 'result', id: method.id, result: 'user-1' });
      assert.equal(await login, 'user-1');
      second.send({ msg: 'added', collection: 'tasks', id: 'a', fields: { n: 1 } });
      await second.sync();
      await eventually(() => client.collection('tasks').findOne('a') !== undefined, 'a document sent after the resume', 2000);
    });
  });

  it('sends a subscription again when a fresh session that had not made it ready is resumed: its sub may have been lost', async () => {
    await connected({}, async (first, client, peer) => {
      const tasks = client.subscribe('tasks');
      await first.next('sub');
      first.send({ msg: 'added', collection: 'tasks', id: 'a', fields: { n: 1 } });
      first.send({ msg: 'ready', subs: [tasks.id] });
      await tasks.ready;
      first.drop();
      const second = await peer.connection();
      await second.handshake('session-2');
      await second.next('sub'); // the cut below loses it on the way, for all the client knows
      second.drop();
      const third = await peer.connection();
      const connect = await third.handshake('session-2');
      assert.equal(connect.session, 'session-2', 'asks to resume the fresh session');
      assert.equal((await third.next('sub')).id, tasks.id);
      third.send({ msg: 'added', collection: 'tasks', id: 'b', fields: { n: 2 } });
      third.send({ msg: 'ready', subs: [tasks.id] });
      await eventually(() => client.collection('tasks').find().length === 1 && client.collection('tasks').findOne('b') !== undefined, "the new session's documents", 2000);
    });
  });

  it('resubscribes and converges: documents not re-sent disappear, unchanged ones cause no events', async () => {
    await connected({}, async (first, client, peer) => {
      const tasks = client.subscribe('tasks');
      const sub = await first.next('sub');
      for (const [id, n] of [['a', 1], ['b', 2], ['c', 3]] as const) {
        first.send({ msg: 'added', collection: 'tasks', id, fields: { n } });
      }
      first.send({ msg: 'ready', subs: [tasks.id] });
      await tasks.ready;
      const collection = client.collection('tasks');
      const a = collection.findOne('a');
      const changes = recordChanges(client, 'tasks');

      first.drop();
      const second = await peer.connection();
      await second.handshake('session-2');
      assert.deepEqual(await second.next('sub'), sub);
      second.send({ msg: 'added', collection: 'tasks', id: 'a', fields: { n: 1 } });
      second.send({ msg: 'added', collection: 'tasks', id: 'b', fields: { n: 20 } });
      await second.sync();
      // Until the subscription is ready again, the old data stays visible.
      assert.deepEqual(changes, []);
      assert.deepEqual(
        collection.find().map((doc) => doc.n),
        [1, 2, 3],
      );

      second.send({ msg: 'ready', subs: [tasks.id] });
      await second.sync();
      assert.deepEqual(summary(changes), [
        ['removed', 'c'],
        ['changed', 'b', { n: 20 }],
      ]);
      assert.equal(collection.findOne('a'), a);
      assert.deepEqual(
        collection.find().map((doc) => doc.n),
        [1, 20],
      );
      assert.equal(client.sessionId, 'session-2');
    });
  });
});

describe('client heartbeats', () => {
  it("answers the server's pings, echoing the id", async () => {
    await connected({}, async (socket) => {
      socket.send({ msg: 'ping', id: 'x1' });
      assert.deepEqual(await socket.next('pong'), { msg: 'pong', id: 'x1' });
      socket.send({ msg: 'ping' });
      assert.deepEqual(await socket.next('pong'), { msg: 'pong' });
    });
  });

  it('pings an idle server and stays connected while it answers', async () => {
    await connected({ heartbeatInterval: 30, heartbeatTimeout: 2000 }, async (socket, client) => {
      for (let i = 0; i < 2; i++) {
        assert.deepEqual(await socket.next('ping'), { msg: 'ping' });
        socket.send({ msg: 'pong' });
      }
      assert.equal(client.status, 'connected');
    });
  });

  it('reconnects when the server stops answering', async () => {
    await connected({ heartbeatInterval: 30, heartbeatTimeout: 30 }, async (socket, client, peer) => {
      const disconnected = nextEvent(client, 'disconnected');
      await socket.next('ping');
      const [info] = await disconnected;
      assert.deepEqual(info, { reason: 'heartbeat timeout', code: undefined, willReconnect: true });
      await (await peer.connection()).handshake('session-2');
      assert.equal(await client.connect(), 'session-2');
    });
  });
});

describe('perseid/check in a page', () => {
  it("bundles for the browser, so that method code a page shares with the server can call Meteor's check", async () => {
    // `check` came only from `perseid`, which a browser bundle cannot take (it needs fs, crypto, ...).
    const { build } = await import('esbuild');
    const shared = `import { check, Match, MatchError } from 'perseid/check';
      export function addTask(text, done) { check(text, String); check(done, Match.Optional(Boolean)); return 'checked'; }
      export { MatchError };`;
    const result = await build({ stdin: { contents: shared, resolveDir: fileURLToPath(new URL('.', import.meta.url)) }, bundle: true, platform: 'browser', format: 'esm', write: false, logLevel: 'silent' });
    const bundle = result.outputFiles[0]!.text;
    assert.doesNotMatch(bundle, /(from|import|require)\s*\(?\s*["']node:/, 'the bundle imports a node: module');
    const page = (await import(`data:text/javascript,${encodeURIComponent(bundle)}`)) as { addTask(...args: unknown[]): string; MatchError: typeof Error };
    assert.equal(page.addTask('milk', true), 'checked');
    assert.throws(() => page.addTask(42), (error: Error) => error instanceof page.MatchError && /Expected string, got number/.test(error.message));
  });
});

/** Byte budgets of the browser bundles: the sizes measured when they were set plus a small margin (BENCHMARKS.md). */
const BUNDLE_BUDGETS: Record<string, { minified: number; gzip: number }> = {
  'perseid/client': { minified: 93.7 * 1024, gzip: 32.0 * 1024 },
  'perseid/client + perseid/react (React external)': { minified: 96.0 * 1024, gzip: 32.8 * 1024 },
};

describe('client browser bundle', () => {
  const bundleUrl = new URL('../browser/perseid-client.js', import.meta.url);
  let build: SpawnSyncReturns<string>;
  before(() => {
    const script = fileURLToPath(new URL('../../scripts/build-browser.js', import.meta.url));
    build = spawnSync(process.execPath, [script], { encoding: 'utf8' });
  });

  it('builds with esbuild for the browser, with no Node built-in in it', () => {
    assert.equal(build.status, 0, build.stderr);
    const bundle = readFileSync(bundleUrl, 'utf8');
    assert.doesNotMatch(bundle, /(from|import|require)\s*\(?\s*["']node:/, 'the bundle imports a node: module');
    assert.match(bundle, /export\s*\{[^}]*\bDDPClient\b/);
  });

  it('stays within its size budget', (t) => {
    assert.equal(build.status, 0, build.stderr);
    const sizes = JSON.parse(readFileSync(new URL('../browser/sizes.json', import.meta.url), 'utf8')) as Record<string, { minified: number; gzip: number }>;
    t.diagnostic(build.stdout.trim());
    for (const [name, budget] of Object.entries(BUNDLE_BUDGETS)) {
      const size = sizes[name];
      assert.ok(size, `sizes.json has no entry for ${name}`);
      const figures = `${name}: ${size.minified} bytes minified, ${size.gzip} gzip; budget ${budget.minified} and ${budget.gzip}`;
      assert.ok(size.minified <= budget.minified && size.gzip <= budget.gzip, `over budget: ${figures}`);
    }
  });

  it('is as big as docs/client.md says', () => {
    assert.equal(build.status, 0, build.stderr);
    const { minified, gzip, mingoMinified } = (JSON.parse(readFileSync(new URL('../browser/sizes.json', import.meta.url), 'utf8')) as Record<string, { minified: number; gzip: number; mingoMinified: number }>)['perseid/client']!;
    const kib = (bytes: number) => (bytes / 1024).toFixed(1);
    const page = readFileSync(new URL('../../docs/client.md', import.meta.url), 'utf8').replace(/\s+/g, ' ');
    const stated = /The browser build is ([\d.]+) KiB minified, ([\d.]+) KiB gzip .*?of which the query engine is ([\d.]+) KiB minified/.exec(page);
    assert.ok(stated, 'docs/client.md states the browser build\'s size');
    assert.deepEqual(stated.slice(1), [kib(minified), kib(gzip), kib(mingoMinified)], 'docs/client.md: minified, gzip, the query engine (KiB), as npm run build prints them');
  });

  it('refuses the query operators a page leaves to the server with one line naming each', async () => {
    const page = (await import(bundleUrl.href)) as typeof BrowserClient;
    const client = new page.DDPClient('http://127.0.0.1:9', { autoConnect: false, WebSocket: class {} as unknown as WebSocketConstructor });
    const docs = client.collection<{ _id: string; n: number }>('docs');
    for (const [operator, selector] of [
      ['$where', { $where: 'this.n > 1' }],
      ['$expr', { $expr: { $gt: ['$n', 1] } }],
      ['$jsonSchema', { $and: [{ $jsonSchema: { required: ['n'] } }] }],
    ] as const) {
      assert.throws(
        () => docs.find(selector as LocalSelector<{ _id: string; n: number }>),
        (error: Error) => error.message.includes(`${operator} is not available in the browser client`) && !error.message.includes('\n'),
        operator,
      );
    }
    // The rarer operators a page keeps still answer (a stub writes the document: nothing else may).
    client.methods({ add: () => docs.insert({ _id: 'a', n: 3 }) });
    void client.call('add').catch(() => undefined); // never sent: the client stays idle
    assert.deepEqual(docs.find({ n: { $bitsAllSet: 1, $mod: [2, 1], $type: 'number' } }), [{ _id: 'a', n: 3 }]);
    assert.deepEqual(docs.find({ n: { $bitsAllSet: 4 } }), []);
  });
});
