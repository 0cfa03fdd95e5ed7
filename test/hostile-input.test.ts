/**
 * Hostile input over every transport: messages nested to exhaust the stack,
 * `__proto__` in EJSON, messages that grow past the limit fragment by fragment
 * or while inflating, binary frames, huge and malformed SockJS bodies. None may
 * crash the server or disturb another client; each is refused with a clear
 * error or close. And the last-resort handler of `perseid start`, for app code
 * that fails outside any connection.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { EJSON } from '../src/ddp/ejson.js';
import { Session } from '../src/server/session.js';
import { FrameReader, httpRequest, openRawWebSocket, SockjsXhrSession, textFrame, type ServerFrame } from '../scripts/fuzz/wire.js';
import { RawPeer, startServer, type Message, type TestServer } from './helpers.js';
import { exited, SockjsPeer, startPerseid } from './processes.js';

const TOO_DEEP = 'Message nested too deeply (more than 128 levels)';

const nested = {
  arrays: (depth: number) => '['.repeat(depth) + ']'.repeat(depth),
  objects: (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth),
};

/** Where the nested value goes: alone before `connect`, or as a method's or a subscription's parameter. */
const positions = {
  'before connect': (value: string) => value,
  'as method params': (value: string) => `{"msg":"method","id":"deep","method":"echo","params":[${value}]}`,
  'as sub params': (value: string) => `{"msg":"sub","id":"deep","name":"all","params":[${value}]}`,
};

/** A DDP peer on one transport, sending texts as they are. */
interface Peer {
  sendText(text: string): void;
  next(match: (m: Message) => boolean, timeoutMs?: number): Promise<Message>;
  close(): void;
}

async function rawPeer(t: TestServer): Promise<Peer> {
  const peer = await RawPeer.open(t.wsUrl);
  return { sendText: (text) => peer.send(text), next: (match, ms) => peer.next(match, ms), close: () => peer.close() };
}

const transports: Record<string, (t: TestServer) => Promise<Peer>> = {
  websocket: rawPeer,
  'sockjs websocket': (t) => SockjsPeer.open(`${t.url}/sockjs`, 'websocket'),
  'sockjs xhr': (t) => SockjsPeer.open(`${t.url}/sockjs`, 'xhr-polling'),
};

describe('messages nested to exhaust the stack', () => {
  let t: TestServer;
  let bystander: RawPeer;
  before(async () => {
    t = await startServer((server) => {
      server.methods({ echo: (x: unknown) => x });
      server.publish('all', function () {
        this.ready();
      });
    });
    bystander = await RawPeer.connected(t.wsUrl);
    bystander.send({ msg: 'sub', id: 'b', name: 'all' });
    await bystander.next((m) => m.msg === 'ready');
  });
  after(async () => {
    bystander.close();
    await t.close();
  });

  for (const [transport, open] of Object.entries(transports)) {
    for (const depth of [6000, 100000]) {
      it(`refuses ${depth} levels over ${transport}, wherever they are, and everyone carries on`, async () => {
        const peer = await open(t);
        try {
          let round = 0;
          for (const [position, place] of Object.entries(positions)) {
            for (const [shape, value] of Object.entries(nested)) {
              peer.sendText(place(value(depth)));
              const refused = await peer.next((m) => m.msg === 'error' && m.reason === TOO_DEEP, 10000);
              assert.equal(refused.offendingMessage, undefined, `${position}, ${shape}: the message is not echoed`);
              if (round === 0) {
                peer.sendText(JSON.stringify({ msg: 'connect', version: '1', support: ['1'] }));
                await peer.next((m) => m.msg === 'connected');
              }
              const id = `after-${round++}`;
              peer.sendText(JSON.stringify({ msg: 'method', id, method: 'echo', params: [id] }));
              assert.equal((await peer.next((m) => m.msg === 'result' && m.id === id)).result, id, `${position}, ${shape}: the connection still works`);
            }
          }
          const { result } = await bystander.call(`b-${transport}-${depth}`, 'echo', ['still here']);
          assert.equal(result.result, 'still here');
          assert.equal(bystander.closed, undefined);
        } finally {
          peer.close();
        }
      });
    }
  }

  it('still accepts 128 levels', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    // The message itself is one object and its params one array: 126 levels of value fit.
    peer.send(`{"msg":"method","id":"ok","method":"echo","params":[${nested.arrays(126)}]}`);
    const result = await peer.next((m) => m.msg === 'result');
    assert.equal(result.error, undefined);
    peer.close();
  });
});

describe('__proto__ and friends in EJSON', () => {
  const polluted = () => ({}) as Record<string, unknown>;

  it('decodes them as own data keys, never as the prototype', () => {
    for (const text of [
      '{"$escape":{"__proto__":{"polluted":true}}}',
      '{"__proto__":{"polluted":true},"at":{"$date":1}}',
      '[{"__proto__":{"polluted":true},"b":{"$binary":"AA=="}}]',
    ]) {
      const value = EJSON.parse(text) as Record<string, unknown>;
      const decoded = Array.isArray(value) ? (value[0] as Record<string, unknown>) : value;
      assert.equal(Object.getPrototypeOf(decoded), Object.prototype, text);
      assert.ok(Object.hasOwn(decoded, '__proto__'), `${text}: kept as a key`);
      assert.equal(decoded.polluted, undefined, text);
      assert.deepEqual(Object.keys(decoded).includes('__proto__'), true);
    }
    assert.equal(polluted().polluted, undefined);
  });

  it('clones and encodes them as own data keys', () => {
    const value = JSON.parse('{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}},"prototype":{"x":1},"at":{"$date":5}}') as Record<string, unknown>;
    for (const copy of [EJSON.clone(value), EJSON.fromJSONValue(value) as Record<string, unknown>]) {
      assert.equal(Object.getPrototypeOf(copy), Object.prototype);
      assert.ok(Object.hasOwn(copy, '__proto__') && Object.hasOwn(copy, 'constructor') && Object.hasOwn(copy, 'prototype'));
      assert.equal(copy.polluted, undefined);
    }
    const withDate = { at: new Date(5) } as Record<string, unknown>;
    Object.defineProperty(withDate, '__proto__', { value: { polluted: true }, enumerable: true, writable: true, configurable: true });
    const json = EJSON.toJSONValue(withDate) as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(json), Object.prototype);
    assert.ok(Object.hasOwn(json, '__proto__'));
    assert.equal(EJSON.stringify(withDate, { canonical: true }), '{"__proto__":{"polluted":true},"at":{"$date":5}}');
    assert.equal(polluted().polluted, undefined);
    assert.equal(({} as Record<string, unknown>).constructor, Object);
  });

  it('reaches a method as own keys, over the wire', async () => {
    const t = await startServer((server) =>
      server.methods({
        inspect: (doc: unknown) => ({
          prototypeIsObject: Object.getPrototypeOf(doc as object) === Object.prototype,
          ownKeys: Object.keys(doc as object).sort(),
          polluted: (doc as Record<string, unknown>).polluted ?? null,
        }),
      }),
    );
    try {
      const peer = await RawPeer.connected(t.wsUrl);
      for (const params of ['[{"$escape":{"__proto__":{"polluted":true}}}]', '[{"__proto__":{"polluted":true},"at":{"$date":1}}]']) {
        peer.send(`{"msg":"method","id":"p","method":"inspect","params":${params}}`);
        const { result } = (await peer.next((m) => m.msg === 'result')) as { result: { prototypeIsObject: boolean; ownKeys: string[]; polluted: unknown } };
        assert.equal(result.prototypeIsObject, true, params);
        assert.ok(result.ownKeys.includes('__proto__'), params);
        assert.equal(result.polluted, null, params);
      }
      peer.close();
    } finally {
      await t.close();
    }
  });
});

describe('dates beyond the range of Date', () => {
  it('are a parse error, never an invalid Date that an app could store (the embedded store would not open again)', async () => {
    let stored = 0;
    const t = await startServer((server, { collection }) => {
      const Things = collection<{ _id: string; at: unknown }>('things');
      server.methods({
        async keep(at: unknown) {
          stored++;
          return Things.insertAsync({ at });
        },
      });
    });
    try {
      const peer = await RawPeer.connected(t.wsUrl);
      for (const ms of ['1e300', String(8.64e15 + 1), String(-8.64e15 - 1)]) {
        peer.send(`{"msg":"method","id":"d","method":"keep","params":[{"$date":${ms}}]}`);
        const refused = await peer.next((m) => m.msg === 'error' || m.msg === 'result');
        assert.equal(refused.msg, 'error', ms);
        assert.equal(refused.reason, 'Parse error', ms);
      }
      assert.equal(stored, 0, 'the method never ran');
      peer.send(`{"msg":"method","id":"ok","method":"keep","params":[{"$date":${8.64e15}}]}`);
      const kept = await peer.next((m) => m.msg === 'result');
      assert.equal(kept.error, undefined, 'the last valid date is kept');
      peer.close();
    } finally {
      await t.close();
    }
  });
});

describe('frames and bodies beyond the limits', () => {
  let t: TestServer;
  before(async () => {
    t = await startServer((server) => server.methods({ echo: (x: unknown) => x }), { maxMessageSize: 1024 * 1024 });
  });
  after(() => t.close());

  async function bystanderWorks(): Promise<void> {
    const peer = await RawPeer.connected(t.wsUrl);
    assert.equal((await peer.call('ok', 'echo', ['fine'])).result.result, 'fine');
    peer.close();
  }

  /** Frames the server sends until it closes; resolves with the close code. */
  function closeCode(socket: Socket, timeoutMs = 5000): Promise<number> {
    const reader = new FrameReader();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the server did not close the connection')), timeoutMs);
      socket.on('data', (chunk: Buffer) => {
        for (const frame of reader.push(chunk) as ServerFrame[]) {
          if (frame.opcode === 0x8) {
            clearTimeout(timer);
            resolve(frame.payload.readUInt16BE(0));
          }
        }
      });
      socket.resume();
    });
  }

  it('closes a fragmented message as soon as its fragments pass the limit, before it ends', async () => {
    const { socket, response } = await openRawWebSocket(t.port);
    assert.match(response, /^HTTP\/1.1 101/);
    const closed = closeCode(socket);
    const piece = 'x'.repeat(600 * 1024);
    socket.write(textFrame(`{"msg":"connect","pad":"${piece}`, { fin: false }));
    socket.write(Buffer.concat([Buffer.from([0x00]), textFrame(piece, { fin: false }).subarray(1)])); // a continuation frame, not final
    assert.equal(await closed, 1009);
    socket.destroy();
    await bystanderWorks();
  });

  it('stops inflating a compressed message at the limit (a deflate bomb closes with 1009)', async () => {
    const ws = new WebSocket(t.wsUrl, { perMessageDeflate: { threshold: 0 } });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    assert.match(String(ws.extensions), /permessage-deflate/);
    const closed = new Promise<number>((resolve) => ws.once('close', resolve));
    ws.on('error', () => undefined);
    ws.send(`{"msg":"connect","version":"1","support":["1"],"pad":"${'0'.repeat(15 * 1024 * 1024)}"}`, { compress: true });
    assert.equal(await closed, 1009);
    await bystanderWorks();
  });

  it('refuses an xhr_send body above the limit by its length, unread, with 413', async () => {
    const session = await SockjsXhrSession.open(t.port);
    const reply = await httpRequest(t.port, 'POST', `${session.base}/xhr_send`, Buffer.alloc(3 * 1024 * 1024, 0x20), { 'content-type': 'text/plain' });
    assert.equal(reply.status, 413);
    await bystanderWorks();
  });

  it('refuses a chunked xhr_send body as it passes the limit, while /health stays responsive', async () => {
    const session = await SockjsXhrSession.open(t.port);
    let sent = 0;
    const total = 64 * 1024 * 1024;
    async function* body(): AsyncGenerator<Buffer> {
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      chunk[0] = 0x5b; // '[': the start of a JSON array that never ends
      yield chunk;
      chunk[0] = 0x20;
      for (sent = chunk.length; sent < total; sent += chunk.length) yield chunk;
    }
    const upload = httpRequest(t.port, 'POST', `${session.base}/xhr_send`, body(), { 'content-type': 'text/plain' }).catch((error: Error) => error);
    const latencies: number[] = [];
    let done = false;
    void upload.then(() => (done = true));
    while (!done) {
      const started = performance.now();
      const health = await httpRequest(t.port, 'GET', '/health');
      assert.equal(health.status, 200);
      latencies.push(performance.now() - started);
      await new Promise((r) => setTimeout(r, 5));
    }
    const outcome = await upload;
    if (!(outcome instanceof Error)) assert.equal(outcome.status, 413);
    assert.ok(sent < 16 * 1024 * 1024, `the server stopped reading long before the end (read ${sent} of ${total} bytes)`);
    assert.ok(Math.max(...latencies) < 1000, `/health answered within a second throughout (worst ${Math.round(Math.max(...latencies))} ms)`);
    await bystanderWorks();
  });

  /** A SockJS session over WebSocket that has connected; `messages` collects the DDP messages it receives. */
  async function sockjsWebSocket(): Promise<{ ws: WebSocket; messages: Message[]; closed: Promise<[number, string]> }> {
    const ws = new WebSocket(`ws://127.0.0.1:${t.port}/sockjs/1/${Math.random().toString(36).slice(2)}/websocket`);
    const messages: Message[] = [];
    let closedFrame: (frame: [number, string]) => void = () => undefined;
    const closed = new Promise<[number, string]>((resolve) => (closedFrame = resolve));
    ws.on('message', (data) => {
      const frame = String(data);
      if (frame.startsWith('a')) for (const text of JSON.parse(frame.slice(1)) as string[]) messages.push(JSON.parse(text) as Message);
      if (frame.startsWith('c')) closedFrame(JSON.parse(frame.slice(1)) as [number, string]);
    });
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    ws.send(JSON.stringify([JSON.stringify({ msg: 'connect', version: '1', support: ['1'] })]));
    while (!messages.some((m) => m.msg === 'connected')) await new Promise((r) => setTimeout(r, 5));
    return { ws, messages, closed };
  }

  it('hands on a SockJS frame of 5,000 messages in order, a slice per turn', async () => {
    const { ws, messages } = await sockjsWebSocket();
    const frame = Array.from({ length: 5000 }, (_, i) => JSON.stringify({ msg: 'ping', id: String(i) }));
    frame.push(JSON.stringify({ msg: 'method', id: 'last', method: 'echo', params: ['after'] }));
    ws.send(JSON.stringify(frame));
    while (!messages.some((m) => m.msg === 'result')) await new Promise((r) => setTimeout(r, 10));
    const pongs = messages.filter((m) => m.msg === 'pong').map((m) => Number(m.id));
    assert.deepEqual(pongs, Array.from({ length: 5000 }, (_, i) => i));
    assert.deepEqual(messages.find((m) => m.msg === 'result'), { msg: 'result', id: 'last', result: 'after' });
    assert.equal(ws.readyState, WebSocket.OPEN);
    ws.close();
  });

  it('drops a client whose one frame packs more messages than may wait (250,000 in 1 MB), without holding up the rest', async () => {
    const { ws, messages, closed } = await sockjsWebSocket();
    const bystander = await RawPeer.connected(t.wsUrl);
    const latencies: number[] = [];
    let done = false;
    const pinging = (async () => {
      for (let i = 0; !done && i < 200; i++) {
        const started = performance.now();
        bystander.send({ msg: 'ping', id: `b${i}` });
        await bystander.next((m) => m.msg === 'pong' && m.id === `b${i}`);
        latencies.push(performance.now() - started);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    await new Promise((r) => setTimeout(r, 50));
    ws.send(JSON.stringify(new Array<string>(250_000).fill('x')));
    assert.equal((await closed)[0], 3000);
    done = true;
    await pinging;
    const errors = messages.filter((m) => m.msg === 'error').map((m) => m.reason);
    assert.ok(errors.length <= 1001, `${errors.length} error replies`);
    assert.equal(errors.at(-1), 'Too many messages waiting to run');
    assert.ok(Math.max(...latencies) < 1000, `the bystander's pings were answered within a second throughout (worst ${Math.round(Math.max(...latencies))} ms)`);
    bystander.close();
  });

  it('hands on an xhr_send body of 5,000 messages in order', async () => {
    const session = await SockjsXhrSession.open(t.port);
    const body = [JSON.stringify({ msg: 'connect', version: '1', support: ['1'] })];
    for (let i = 0; i < 5000; i++) body.push(JSON.stringify({ msg: 'ping', id: String(i) }));
    assert.equal((await session.send(body)).status, 204);
    const received: Message[] = [];
    while (received.filter((m) => m.msg === 'pong').length < 5000) {
      const { messages, closed } = await session.poll();
      assert.equal(closed, undefined);
      received.push(...messages.map((text) => JSON.parse(text) as Message));
    }
    assert.deepEqual(
      received.filter((m) => m.msg === 'pong').map((m) => Number(m.id)),
      Array.from({ length: 5000 }, (_, i) => i),
    );
  });

  it('closes a SockJS xhr session whose messages are not strings, and nothing else', async () => {
    const session = await SockjsXhrSession.open(t.port);
    const sent = await session.send('[[1],{"msg":"connect"}]');
    assert.equal(sent.status, 204);
    const polled = await session.poll();
    assert.deepEqual(polled.closed, [3000, 'Broken framing.']);
    await bystanderWorks();
  });
});

describe('messages that never finish arriving', () => {
  it('drops the connections holding the most once their unfinished messages pass the server-wide budget', async () => {
    const t = await startServer((server) => server.methods({ echo: (x: unknown) => x }), { maxMessageSize: 1024 * 1024, maxTotalBufferedBytes: 4 * 1024 * 1024 });
    try {
      const text = `{"msg":"method","id":"m","method":"echo","params":["${'x'.repeat(1000 * 1024)}"]}`;
      const frame = textFrame(text);
      const sockets = await Promise.all(Array.from({ length: 10 }, () => openRawWebSocket(t.port)));
      const closed = sockets.map(({ socket }) => new Promise<boolean>((resolve) => socket.once('close', () => resolve(true))));
      for (const { socket } of sockets) {
        socket.on('error', () => undefined);
        socket.resume();
        socket.write(textFrame(JSON.stringify({ msg: 'connect', version: '1', support: ['1'] })));
        // All of a 1 MB message but its last 10 bytes, and never those.
        socket.write(frame.subarray(0, frame.length - 10));
        await new Promise((r) => setTimeout(r, 20));
      }
      const settled = await Promise.all(closed.map((p) => Promise.race([p, new Promise<boolean>((r) => setTimeout(() => r(false), 1500))])));
      const dropped = settled.filter(Boolean).length;
      assert.ok(dropped >= 6 && dropped <= 7, `${dropped} of 10 dropped: 10 MB held against a 4 MB budget leaves at most 3.6`);
      // The budget counts only unfinished messages: a whole one of the same size goes through.
      const peer = await RawPeer.connected(t.wsUrl);
      assert.equal(((await peer.call('big', 'echo', ['y'.repeat(1000 * 1024)])).result.result as string).length, 1000 * 1024);
      peer.close();
      for (const { socket } of sockets) socket.destroy();
    } finally {
      await t.close();
    }
  });
});

describe('messages waiting behind a slow method', () => {
  it('count in the same budget: past it, the connections with the longest queues are dropped', async () => {
    const t = await startServer(
      (server) =>
        server.methods({
          block: () => new Promise((r) => setTimeout(r, 3000)),
          echo: (x: unknown) => x,
        }),
      { maxMessageSize: 64 * 1024, maxTotalBufferedBytes: 1024 * 1024 },
    );
    try {
      const peers = await Promise.all(Array.from({ length: 6 }, () => RawPeer.connected(t.wsUrl)));
      for (const peer of peers) {
        peer.send({ msg: 'method', id: 'b', method: 'block', params: [] });
        // 800 KB behind it; each session stops reading at 256 KB (four messages' worth), so ~1.6 MB wait in all.
        for (let i = 0; i < 40; i++) peer.send({ msg: 'method', id: `e${i}`, method: 'echo', params: ['z'.repeat(20 * 1024)] });
        await new Promise((r) => setTimeout(r, 50));
      }
      const closed = await Promise.all(peers.map((peer) => peer.waitClosed(1500).then(() => true, () => false)));
      const dropped = closed.filter(Boolean).length;
      assert.ok(dropped >= 2 && dropped < 6, `${dropped} of 6 dropped`);
      const bystander = await RawPeer.connected(t.wsUrl);
      assert.equal((await bystander.call('ok', 'echo', ['fine'])).result.result, 'fine');
      for (const peer of [...peers, bystander]) peer.close();
    } finally {
      await t.close();
    }
  });
});

describe('calls with very many arguments', () => {
  it('refuses 200,000 arguments to a method or a publication with a 400, and runs 10,000', async () => {
    const t = await startServer((server) => {
      server.methods({ count: (...args: unknown[]) => args.length });
      server.publish('count', function (...args: unknown[]) {
        this.added('counts', 'n', { n: args.length });
        this.ready();
      });
    });
    try {
      const peer = await RawPeer.connected(t.wsUrl);
      const many = new Array<number>(200_000).fill(0);
      const refused = (await peer.call('m1', 'count', many)).result.error as Message;
      assert.deepEqual([refused.error, refused.reason], [400, 'Too many arguments (200000; the limit is 10000)']);
      assert.equal((await peer.call('m2', 'count', many.slice(0, 10_000))).result.result, 10_000);
      peer.send({ msg: 'sub', id: 's1', name: 'count', params: many });
      assert.equal(((await peer.next((m) => m.msg === 'nosub')).error as Message).error, 400);
      peer.send({ msg: 'sub', id: 's2', name: 'count', params: many.slice(0, 10_000) });
      assert.deepEqual((await peer.next((m) => m.msg === 'added')).fields, { n: 10_000 });
      peer.close();
    } finally {
      await t.close();
    }
  });
});

describe('SockJS polling sessions turned away', () => {
  it('are forgotten two seconds after they close, not the minute sockjs keeps a session for', async () => {
    const t = await startServer(() => undefined, { maxConnectionsPerAddress: 1 });
    try {
      await SockjsXhrSession.open(t.port);
      const refused = await SockjsXhrSession.open(t.port);
      const received: string[] = [];
      let closed: [number, string] | undefined;
      for (let i = 0; i < 3 && !closed; i++) {
        const polled = await refused.poll();
        received.push(...polled.messages);
        closed = polled.closed;
      }
      assert.match(received.join(), /Too many connections from your address/);
      assert.ok(closed, 'the client is told the session is closed');
      await new Promise((r) => setTimeout(r, 2500));
      // A request to a forgotten session opens a new one ('o'); a remembered one answers its close frame again ('c').
      const again = await httpRequest(t.port, 'POST', `${refused.base}/xhr`, '');
      assert.match(again.body, /^o/);
    } finally {
      await t.close();
    }
  });
});

describe("an exception in one connection's handling", () => {
  it('closes that connection only: the server and the other subscribers carry on', async () => {
    const t = await startServer((server, { collection }) => {
      const items = collection('items');
      server.publish('items', () => items.find());
      server.methods({ add: (n: unknown) => items.insertAsync({ n }) });
    });
    // A fault in handing a change to a connection, injected for the first subscriber the change reaches: bugs cannot be made to order.
    const original = Session.prototype.sendEncoded;
    let armed = false;
    Session.prototype.sendEncoded = function (this: Session, ...args: Parameters<Session['sendEncoded']>) {
      if (armed) {
        armed = false;
        throw new Error('injected fault');
      }
      return original.apply(this, args);
    };
    try {
      const [a, b, writer] = await Promise.all([1, 2, 3].map(() => RawPeer.connected(t.wsUrl)));
      for (const peer of [a!, b!]) {
        peer.send({ msg: 'sub', id: 's', name: 'items' });
        await peer.next((m) => m.msg === 'ready');
      }
      armed = true;
      const { result } = await writer!.call('w', 'add', [1]);
      assert.equal(result.error, undefined, 'the write succeeds');
      const [broken, whole] = await Promise.race([a!.waitClosed().then(() => [a!, b!]), b!.waitClosed().then(() => [b!, a!])]);
      assert.ok(broken!.closed);
      assert.equal((await whole!.next((m) => m.msg === 'added')).collection, 'items', 'the other subscriber got the change');
      assert.equal(whole!.closed, undefined);
      assert.equal((await writer!.call('w2', 'add', [2])).result.error, undefined, 'the server carries on');
      await whole!.next((m) => m.msg === 'added');
      for (const peer of [whole!, writer!]) peer.close();
    } finally {
      Session.prototype.sendEncoded = original;
      await t.close();
    }
  });
});

describe("one connection's overlapping subscriptions", () => {
  // Each further subscription once cost every document a look at every earlier one (minutes of CPU for a few hundred).
  it('costs each of 300 identical subscriptions to 3,000 documents what one costs, and sends each document once', async () => {
    const t = await startServer((server, { collection }) => {
      const items = collection('items');
      server.publish('items', () => items.find());
      server.methods({
        fill: async (n: unknown) => {
          for (let i = 0; i < (n as number); i++) await items.insertAsync({ i, text: `item ${i}` });
        },
      });
    });
    try {
      const peer = await RawPeer.connected(t.wsUrl);
      await peer.call('f', 'fill', [3000]);
      const started = performance.now();
      for (let i = 0; i < 300; i++) peer.send({ msg: 'sub', id: `s${i}`, name: 'items' });
      const subscribed = await peer.until((m) => m.msg === 'ready' && (m.subs as string[]).includes('s299'), 30_000);
      assert.equal(subscribed.filter((m) => m.msg === 'ready').length, 300);
      assert.equal(subscribed.filter((m) => m.msg === 'added').length, 3000);
      assert.deepEqual(subscribed.filter((m) => m.msg !== 'added' && m.msg !== 'ready' && m.msg !== 'result' && m.msg !== 'updated'), []);
      for (let i = 0; i < 300; i++) peer.send({ msg: 'unsub', id: `s${i}` });
      const ended = await peer.until((m) => m.msg === 'nosub' && m.id === 's299', 30_000);
      assert.equal(ended.filter((m) => m.msg === 'removed').length, 3000, 'each document removed once, with the last subscription');
      assert.deepEqual(ended.filter((m) => m.msg === 'changed'), []);
      const seconds = (performance.now() - started) / 1000;
      assert.ok(seconds < 15, `600 subscription messages took ${seconds.toFixed(1)} s`);
      peer.close();
    } finally {
      await t.close();
    }
  });
});

describe('the last resort of `perseid start`', () => {
  for (const [method, kind] of [
    ['crashLater', 'uncaught exception'],
    ['rejectLater', 'unhandled promise rejection'],
  ] as const) {
    it(`logs an ${kind} in app code on one line with its stack and exits with status 1`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'perseid-last-resort-'));
      try {
        const server = await startPerseid('dist/test/fixtures/hostile-app.js', ['--port', '0', '--data-dir', dir]);
        const peer = await RawPeer.connected(`ws://127.0.0.1:${server.port}/websocket`);
        peer.send({ msg: 'method', id: 'm', method, params: [] });
        assert.equal(await exited(server.child), 1);
        const line = server.log().split('\n').find((l) => l.includes(`${kind}: exiting`));
        assert.ok(line, `one line says so: ${server.log()}`);
        assert.match(line, /ERROR/);
        assert.match(line, /deliberate (failure outside any method|rejection nobody handles)/);
        assert.match(line, /at .*hostile-app\.js/, 'with the stack');
        peer.close();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
