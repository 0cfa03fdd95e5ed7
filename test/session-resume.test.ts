/**
 * Session resumption (Meteor 3.5) with real sockets: a TCP relay between the
 * client and the server stands for the network, and cutting it loses what was
 * in flight and ends both sockets without a WebSocket close, as a dropped
 * network does. The client gets its session back with only what it missed,
 * without subscribing again; a method running across the cut answers once;
 * when the session is gone (its grace period or its cap passed) or the
 * reconnect lands on another process, the client starts a fresh session and
 * its data converges; a deliberate disconnect or close ends a session at once;
 * SockJS's WebSocket transport resumes too; the sessions waiting for their
 * clients are capped.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { DDPClient } from '../src/client/node.js';
import type { ServerOptions } from '../src/server/app.js';
import { FAST_BACKOFF } from './client-peer.js';
import clusterApp from './fixtures/cluster-app.js';
import { RawPeer, startServer, type Message, type TestServer } from './helpers.js';
import { eventually, startPerseid, type PerseidProcess } from './processes.js';

interface Item {
  _id: string;
  n: number;
  by?: string;
}

/**
 * A TCP relay on loopback to a server's port: `cut()` destroys every pair of
 * sockets (what either side had not yet passed on is lost); while `down` it
 * drops new connections at once.
 */
class Relay {
  private readonly pairs = new Set<[Socket, Socket]>();
  down = false;
  private constructor(
    private readonly server: Server,
    public target: number,
  ) {
    server.on('connection', (client) => {
      if (this.down) {
        client.destroy();
        return;
      }
      const upstream = connect(this.target, '127.0.0.1');
      const pair: [Socket, Socket] = [client, upstream];
      this.pairs.add(pair);
      const end = () => {
        client.destroy();
        upstream.destroy();
        this.pairs.delete(pair);
      };
      client.on('error', end).on('close', end);
      upstream.on('error', end).on('close', end);
      client.pipe(upstream);
      upstream.pipe(client);
    });
  }

  static async start(target: number): Promise<Relay> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return new Relay(server, target);
  }

  get url(): string {
    const address = this.server.address() as { port: number };
    return `ws://127.0.0.1:${address.port}/websocket`;
  }

  get open(): number {
    return this.pairs.size;
  }

  cut(): void {
    for (const [client, upstream] of this.pairs) {
      // Unread bytes on either side go with the sockets: the messages in flight are lost.
      client.unpipe();
      upstream.unpipe();
      client.destroy();
      upstream.destroy();
    }
    this.pairs.clear();
  }

  close(): Promise<void> {
    this.cut();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** A client over `relay`, counting what it receives and failing the test on any error it reports. */
function clientOver(relay: Relay): { client: DDPClient; errors: Error[]; added: Map<string, number>; connects: Array<{ session: string; resumed: boolean }> } {
  const client = new DDPClient(relay.url, { heartbeatInterval: 0, backoff: FAST_BACKOFF });
  const errors: Error[] = [];
  const added = new Map<string, number>();
  const connects: Array<{ session: string; resumed: boolean }> = [];
  // Reconnect attempts the relay turns away while down fail as sockets do; anything else counts.
  client.on('error', (error) => {
    if ((error as NodeJS.ErrnoException).code !== 'ECONNRESET') errors.push(error);
  });
  client.on('message', (message) => {
    if (message.msg === 'added' && message.collection === 'items') added.set(message.id, (added.get(message.id) ?? 0) + 1);
  });
  client.on('connected', (session, resumed) => connects.push({ session, resumed }));
  return { client, errors, added, connects };
}

/** SockJS's WebSocket transport by hand (`/sockjs/<server>/<session>/websocket`), to drop it without a close frame. */
class SockjsSocket {
  readonly messages: Message[] = [];
  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const frame = String(data);
      if (frame.startsWith('a')) for (const text of JSON.parse(frame.slice(1)) as string[]) this.messages.push(JSON.parse(text) as Message);
    });
  }

  static async open(httpUrl: string): Promise<SockjsSocket> {
    const ws = new WebSocket(`${httpUrl.replace('http', 'ws')}/sockjs/000/${Math.random().toString(36).slice(2, 10)}/websocket`);
    const socket = new SockjsSocket(ws);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    return socket;
  }

  send(message: Message): void {
    this.ws.send(JSON.stringify([JSON.stringify(message)]));
  }

  async next(match: (m: Message) => boolean): Promise<Message> {
    let found: Message | undefined;
    await eventually(() => (found = this.messages.find(match)) !== undefined, 'a message over SockJS');
    return found!;
  }
}

/** A gate the server's `gated` method waits at until the test opens it. */
class Gate {
  private opened: (() => void) | undefined;
  private promise = this.reset();
  private reset(): Promise<void> {
    return new Promise((resolve) => (this.opened = resolve));
  }
  pass(): Promise<void> {
    return this.promise;
  }
  open(): void {
    this.opened?.();
    this.promise = this.reset();
  }
}

async function appServer(options: ServerOptions, gate = new Gate(), runs = { gated: 0, subscriptions: 0, connections: 0 }): Promise<TestServer> {
  return startServer(
    (server) => {
      clusterApp(server);
      server.methods({
        async gated() {
          runs.gated++;
          await gate.pass();
          return 'through';
        },
      });
      server.beforeDispatch((event) => {
        if (event.type === 'subscription') runs.subscriptions++;
      });
      server.onConnection(() => runs.connections++);
    },
    { heartbeatInterval: 0, ...options },
  );
}

describe('session resumption', () => {
  describe('over a connection cut mid-stream', () => {
    const gate = new Gate();
    const runs = { gated: 0, subscriptions: 0, connections: 0 };
    let t: TestServer;
    let relay: Relay;

    before(async () => {
      t = await appServer({}, gate, runs);
      relay = await Relay.start(t.port);
    });
    after(async () => {
      await relay.close();
      await t.close();
    });

    it('gets the same session back with only what it missed: no new subscription, every document once', async () => {
      const { client, errors, added, connects } = clientOver(relay);
      const items = client.collection<Item>('items');
      const Items = t.collection<Item>('items');
      try {
        const sub = client.subscribe('items');
        await sub.ready;
        const total = 400;
        // The server writes while the client reads; the relay is cut part-way through.
        const writing = (async () => {
          for (let n = 0; n < total; n++) await Items.insertAsync({ n, by: 'stream' });
        })();
        await eventually(() => items.find().length >= 50, 'the first documents of the stream');
        relay.cut();
        await writing;
        await eventually(() => items.find().length === total, `all ${total} documents`, 10000);
        assert.equal(connects.length, 2, 'one reconnect');
        assert.deepEqual(connects[1], { session: connects[0]!.session, resumed: true });
        assert.equal(runs.subscriptions, 1, 'the subscription was not sent again');
        assert.equal(runs.connections, 1, 'onConnection ran once');
        assert.equal([...added.values()].filter((count) => count !== 1).length, 0, 'no document was added twice');
        assert.equal(added.size, total);
        assert.deepEqual(errors, []);
        assert.equal(t.server.sessionCount, 1);
        assert.equal(t.server.awaitingResumeCount, 0);
        // And it keeps working: a write after the resume arrives as usual.
        await Items.insertAsync({ n: -1, by: 'after' });
        await eventually(() => items.findOne({ by: 'after' }) !== undefined, 'a write after the resume');
      } finally {
        client.disconnect();
        await Items.removeAsync({});
      }
    });

    it('answers a method that was running when the connection was cut, and runs it once', async () => {
      const { client, errors, connects } = clientOver(relay);
      try {
        await client.connect();
        const before = runs.gated;
        const call = client.call('gated');
        await eventually(() => runs.gated === before + 1, 'the method running');
        // Down until the server has seen the client go: a reconnect through a relay that is up resumes the session
        // within milliseconds, before a check could see it waiting (failed 2 in 6 runs).
        relay.down = true;
        relay.cut();
        await eventually(() => t.server.awaitingResumeCount === 1, 'the session waiting for its client');
        // It finishes while its client is away: the answer waits in the session.
        gate.open();
        relay.down = false;
        assert.equal(await call, 'through');
        assert.equal(runs.gated, before + 1, 'the repeated call did not run again');
        assert.equal(connects.at(-1)?.resumed, true);
        assert.deepEqual(errors, []);
      } finally {
        client.disconnect();
      }
    });

    it('resumes a second time with every message it missed: the first resume\'s `connected` is not counted', async () => {
      const { client, errors, connects } = clientOver(relay);
      const items = client.collection<Item>('items');
      const Items = t.collection<Item>('items');
      try {
        await client.subscribe('items').ready;
        await Items.insertAsync({ _id: 'kept', n: 1 });
        await Items.insertAsync({ _id: 'gone', n: 2 });
        await eventually(() => items.find().length === 2, 'both documents');
        for (const round of [1, 2]) {
          relay.down = true;
          relay.cut();
          await eventually(() => t.server.awaitingResumeCount === 1, `the session waiting for its client (cut ${round})`);
          // Sent while the client is away: held for it, and the first message it will be sent again.
          if (round === 2) await Items.removeAsync({ _id: 'gone' });
          relay.down = false;
          await eventually(() => connects.length === round + 1, `reconnect ${round}`);
        }
        assert.deepEqual(connects.map((c) => c.resumed), [false, true, true]);
        await eventually(() => items.findOne('gone') === undefined, 'the removal held while the client was away', 3000);
        assert.deepEqual(items.find().map((d) => d._id), ['kept']);
        assert.deepEqual(errors, []);
      } finally {
        client.disconnect();
        await Items.removeAsync({});
      }
    });

    it('ends the session at once on a deliberate disconnect', async () => {
      const { client } = clientOver(relay);
      await client.connect();
      assert.equal(t.server.sessionCount, 1);
      client.disconnect();
      await eventually(() => t.server.sessionCount === 0, 'the session ending');
      assert.equal(t.server.awaitingResumeCount, 0);
    });
  });

  describe('falling back to a fresh session', () => {
    it('when the reconnect lands on another process: the data converges to what that one publishes', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'perseid-resume-'));
      const t = await appServer({});
      let other: PerseidProcess | undefined;
      const relay = await Relay.start(t.port);
      const { client, errors, connects } = clientOver(relay);
      try {
        other = await startPerseid('dist/test/fixtures/cluster-app.js', ['--port', '0', '--data-dir', dir]);
        const items = client.collection<Item>('items');
        await t.collection<Item>('items').insertAsync({ n: 1, by: 'first' });
        await client.subscribe('items').ready;
        assert.deepEqual(items.find().map((item) => item.by), ['first']);
        const here = (await client.call<{ pid: number }>('whoami')).pid;
        assert.equal(here, process.pid);
        // The balancer sends the reconnect elsewhere; a call made meanwhile waits for it.
        relay.target = other.port;
        relay.cut();
        const call = client.call('addItem', 2, 'second');
        await eventually(() => connects.length === 2, 'the reconnect');
        assert.equal(connects[1]!.resumed, false);
        assert.notEqual(connects[1]!.session, connects[0]!.session);
        await call;
        await eventually(() => items.find().length === 1 && items.findOne({ by: 'second' }) !== undefined, "the other process's documents only");
        assert.equal((await client.call<{ pid: number }>('whoami')).pid, other.child.pid);
        assert.deepEqual(errors, []);
        // The first process's session was left behind: it waits out its grace period, nothing more.
        assert.equal(t.server.awaitingResumeCount, 1);
      } finally {
        client.disconnect();
        await relay.close();
        await other?.stop();
        await t.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('when the grace period has passed', async () => {
      const t = await appServer({ resumeGracePeriod: 100 });
      const relay = await Relay.start(t.port);
      const { client, errors, connects } = clientOver(relay);
      try {
        await client.subscribe('items').ready;
        relay.down = true;
        relay.cut();
        await eventually(() => t.server.awaitingResumeCount === 1, 'the session waiting');
        await eventually(() => t.server.awaitingResumeCount === 0, 'the grace period running out');
        assert.equal(t.server.sessionCount, 0);
        await t.collection<Item>('items').insertAsync({ n: 3, by: 'meanwhile' });
        relay.down = false;
        await eventually(() => connects.length === 2, 'the reconnect');
        assert.equal(connects[1]!.resumed, false);
        await eventually(() => client.collection<Item>('items').findOne({ by: 'meanwhile' }) !== undefined, 'the fresh session\u2019s data');
        assert.deepEqual(errors, []);
      } finally {
        client.disconnect();
        await relay.close();
        await t.close();
      }
    });

    it('when the session held more for its client than its cap, and then ended', async () => {
      const t = await appServer({ resumeMaxMessages: 20 });
      const relay = await Relay.start(t.port);
      const { client, errors, connects } = clientOver(relay);
      try {
        await client.subscribe('items').ready;
        relay.down = true;
        relay.cut();
        await eventually(() => t.server.awaitingResumeCount === 1, 'the session waiting');
        const Items = t.collection<Item>('items');
        for (let n = 0; n < 50; n++) await Items.insertAsync({ n, by: 'while away' });
        await eventually(() => t.server.awaitingResumeCount === 0, 'the session ending past its cap');
        assert.equal(t.server.sessionCount, 0);
        relay.down = false;
        await eventually(() => connects.length === 2, 'the reconnect');
        assert.equal(connects[1]!.resumed, false);
        await eventually(() => client.collection<Item>('items').find().length === 50, 'every document, from the fresh session');
        assert.deepEqual(errors, []);
      } finally {
        client.disconnect();
        await relay.close();
        await t.close();
      }
    });
  });

  describe('on the wire', () => {
    let t: TestServer;
    before(async () => {
      t = await appServer({ resumeMaxSessions: 2 });
      const Items = t.collection<Item>('items');
      for (let n = 0; n < 5; n++) await Items.insertAsync({ n });
    });
    after(() => t.close());

    /** A session subscribed to the 5 items (1 connected + 5 added + 1 ready = 7 messages), then dropped without a close. */
    async function dropped(): Promise<{ session: string; messages: Message[] }> {
      const waiting = Math.min(t.server.awaitingResumeCount + 1, 2);
      const peer = await RawPeer.connected(t.wsUrl);
      peer.send({ msg: 'sub', id: 's1', name: 'items', params: [] });
      await peer.next((m) => m.msg === 'ready');
      const messages = [...peer.received];
      peer.ws.terminate();
      await eventually(() => t.server.awaitingResumeCount === waiting, 'the session waiting');
      return { session: peer.session, messages };
    }

    it('sends exactly the messages after receivedCount, under the same session id', async () => {
      const { session, messages } = await dropped();
      assert.equal(messages.length, 7);
      const peer = await RawPeer.open(t.wsUrl);
      // The client says it received 4: the last three (two added and the ready) come again.
      peer.send({ msg: 'connect', version: '1', support: ['1'], session, receivedCount: 4 });
      assert.deepEqual(await peer.next(), { msg: 'connected', session });
      const replay = await peer.until((m) => m.msg === 'ready');
      assert.deepEqual(replay, messages.slice(4));
      assert.equal(t.server.awaitingResumeCount, 0);
      // The resumed session carries on: a repeated sub is ignored, an unsub answered.
      peer.send({ msg: 'sub', id: 's1', name: 'items', params: [] });
      peer.send({ msg: 'unsub', id: 's1' });
      const afterwards = await peer.until((m) => m.msg === 'nosub');
      assert.equal(afterwards.filter((m) => m.msg === 'added' || m.msg === 'ready').length, 0);
      peer.close();
      await eventually(() => t.server.sessionCount === 0, 'a close on purpose ending it at once');
      assert.equal(t.server.awaitingResumeCount, 0);
    });

    it('resumes again after a resume: the replayed messages count once', async () => {
      const { session, messages } = await dropped();
      let peer = await RawPeer.open(t.wsUrl);
      peer.send({ msg: 'connect', version: '1', support: ['1'], session, receivedCount: 4 });
      await peer.next((m) => m.msg === 'connected');
      assert.deepEqual(await peer.until((m) => m.msg === 'ready'), messages.slice(4));
      const insertedId = await t.collection<Item>('items').insertAsync({ n: 100 });
      const added = await peer.next((m) => m.msg === 'added' && m.id === insertedId);
      // 4, the resumed connected (counted on both sides, as Meteor 3.5 does), 3 more, then the added: the client has 9;
      // it claims 8 and gets the added again, nothing else.
      peer.ws.terminate();
      await eventually(() => t.server.awaitingResumeCount === 1, 'the session waiting again');
      peer = await RawPeer.open(t.wsUrl);
      peer.send({ msg: 'connect', version: '1', support: ['1'], session, receivedCount: 8 });
      assert.deepEqual(await peer.next(), { msg: 'connected', session });
      peer.send({ msg: 'unsub', id: 's1' });
      const replay = await peer.until((m) => m.msg === 'nosub');
      assert.deepEqual(replay[0], added);
      assert.equal(replay.filter((m) => m.msg === 'added').length, 1);
      await t.collection<Item>('items').removeAsync({ n: 100 });
      peer.close();
      await eventually(() => t.server.sessionCount === 0, 'closed');
    });

    it('resumes a session whose old connection this side still thinks open', async () => {
      const old = await RawPeer.connected(t.wsUrl);
      old.send({ msg: 'sub', id: 's1', name: 'items', params: [] });
      await old.next((m) => m.msg === 'ready');
      const messages = [...old.received];
      const peer = await RawPeer.open(t.wsUrl);
      peer.send({ msg: 'connect', version: '1', support: ['1'], session: old.session, receivedCount: 5 });
      assert.deepEqual(await peer.next(), { msg: 'connected', session: old.session });
      assert.deepEqual(await peer.until((m) => m.msg === 'ready'), messages.slice(5));
      peer.close();
      await eventually(() => t.server.sessionCount === 0, 'closed');
    });

    it('leaves a connected session to its client when a resume naming it comes from another address', async () => {
      const old = await RawPeer.connected(t.wsUrl);
      old.send({ msg: 'sub', id: 's1', name: 'items', params: [] });
      await old.next((m) => m.msg === 'ready');
      // A stranger who learnt the session's id, from another address (all of 127/8 is loopback), with the right count and a wrong one.
      for (const receivedCount of [old.received.length, 99]) {
        const stranger = await RawPeer.open(t.wsUrl, { localAddress: '127.0.0.2' });
        stranger.send({ msg: 'connect', version: '1', support: ['1'], session: old.session, receivedCount });
        const connected = await stranger.next((m) => m.msg === 'connected');
        assert.notEqual(connected.session, old.session, `a fresh session, not the client's (count ${receivedCount})`);
        stranger.close();
      }
      // The client's connection is untouched and its session still its own.
      old.send({ msg: 'unsub', id: 's1' });
      assert.equal((await old.next((m) => m.msg === 'nosub')).id, 's1');
      assert.equal(old.closed, undefined);
      old.close();
      await eventually(() => t.server.sessionCount === 0, 'closed');
    });

    it('starts afresh, ending the old session, when the count does not match', async () => {
      for (const receivedCount of [99, -1, 2.5]) {
        const { session } = await dropped();
        const peer = await RawPeer.open(t.wsUrl);
        peer.send({ msg: 'connect', version: '1', support: ['1'], session, receivedCount });
        const connected = await peer.next((m) => m.msg === 'connected');
        assert.notEqual(connected.session, session, String(receivedCount));
        peer.close();
        await eventually(() => t.server.sessionCount === 0, `the old session ended (${String(receivedCount)})`);
        assert.equal(t.server.awaitingResumeCount, 0);
      }
    });

    it('leaves a session alone when a client names it without a count (older Meteor clients)', async () => {
      const { session } = await dropped();
      for (const claim of [{}, { receivedCount: '7' }]) {
        const peer = await RawPeer.open(t.wsUrl);
        peer.send({ msg: 'connect', version: '1', support: ['1'], session, ...claim });
        const connected = await peer.next((m) => m.msg === 'connected');
        assert.notEqual(connected.session, session);
        assert.equal(t.server.awaitingResumeCount, 1, 'the old one waits out its grace period');
        peer.close();
        await eventually(() => t.server.sessionCount === 0, 'the new one closed');
      }
    });

    it("resumes over SockJS's WebSocket transport; a close frame there still ends the session at once", async () => {
      const first = await SockjsSocket.open(t.url);
      first.send({ msg: 'connect', version: '1', support: ['1'] });
      const { session } = await first.next((m) => m.msg === 'connected');
      first.send({ msg: 'sub', id: 's1', name: 'items', params: [] });
      await first.next((m) => m.msg === 'ready');
      const waitingBefore = t.server.awaitingResumeCount;
      first.ws.terminate();
      await eventually(() => t.server.awaitingResumeCount === waitingBefore + 1, 'the session waiting');
      const second = await SockjsSocket.open(t.url);
      second.send({ msg: 'connect', version: '1', support: ['1'], session, receivedCount: first.messages.length - 1 });
      await second.next((m) => m.msg === 'ready');
      assert.deepEqual(second.messages, [{ msg: 'connected', session }, { msg: 'ready', subs: ['s1'] }]);
      assert.equal(t.server.awaitingResumeCount, waitingBefore);
      // Closed with a close frame (sockjs-client's close()): over and done, nothing waits.
      const sessions = t.server.sessionCount;
      second.ws.close();
      await eventually(() => t.server.sessionCount === sessions - 1, 'the session ending');
      assert.equal(t.server.awaitingResumeCount, waitingBefore);
    });

    it('caps the sessions waiting for their clients', async () => {
      const before = t.server.awaitingResumeCount;
      for (let i = 0; i < 3; i++) await dropped();
      assert.ok(before <= 2);
      // Three dropped, two kept: the longest waiting one ended when the third began to wait.
      await eventually(() => t.server.sessionCount === 0 && t.server.awaitingResumeCount === 2, 'two sessions, both waiting');
    });
  });
});
