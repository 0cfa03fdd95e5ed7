/**
 * Bad input gets a clear DDP error (or, for broken WebSocket framing, a clean
 * close), loses nothing, and never disturbs the server or other connections.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Collection } from '../src/collections/collection.js';
import { createWithSeeds } from '../src/ddp/random.js';
import { fuzzMessages } from '../scripts/fuzz/generate.js';
import { RawPeer, startServer, type TestServer } from './helpers.js';
import { SockjsPeer } from './processes.js';

describe('bad input', () => {
  let t: TestServer;
  let items: Collection;
  before(async () => {
    t = await startServer(
      (server, { collection }) => {
        items = collection('fuzzed');
        server.methods({
          echo: (x: unknown) => x,
          add: (doc: unknown) => items.insertAsync(doc as object),
          size: (s: unknown) => (s as string).length,
        });
        server.publish('all', () => items.find());
      },
      { maxMessageSize: 1024 * 1024 },
    );
  });
  after(() => t.close());

  /** A second connection that must keep working whatever the first one does. */
  async function bystanderWorks(): Promise<void> {
    const peer = await RawPeer.connected(t.wsUrl);
    const { result } = await peer.call('ok', 'echo', ['still here']);
    assert.equal(result.result, 'still here');
    peer.close();
  }

  it('answers unparsable and unknown messages with Bad request and stays open', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    for (const text of ['not json', '{"msg":', '[]', '42', 'null', '"connect"', '{}', '{"msg":5}']) {
      peer.send(text);
      const m = await peer.next();
      assert.equal(m.msg, 'error', text);
      assert.equal(m.reason, 'Bad request', text);
    }
    peer.send({ msg: 'frobnicate', id: '1' });
    assert.deepEqual(await peer.next(), { msg: 'error', reason: 'Bad request', offendingMessage: { msg: 'frobnicate', id: '1' } });
    peer.ws.send(Buffer.from('{"msg":"ping"}'), { binary: true });
    assert.deepEqual(await peer.next(), { msg: 'error', reason: 'Binary frames are not DDP: send each message as a text frame' });
    const { result } = await peer.call('1', 'echo', [1]);
    assert.equal(result.result, 1);
    peer.close();
  });

  it('echoes a refused message only when it is small', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'frobnicate', pad: 'x'.repeat(2000) });
    assert.deepEqual(await peer.next(), { msg: 'error', reason: 'Bad request' });
    peer.send({ msg: 'connect', version: '1', support: ['1'], pad: 'x'.repeat(2000) });
    assert.deepEqual(await peer.next(), { msg: 'error', reason: 'Already connected' });
    peer.send({ msg: 'connect', version: '1', support: ['1'] });
    assert.deepEqual(await peer.next(), { msg: 'error', reason: 'Already connected', offendingMessage: { msg: 'connect', version: '1', support: ['1'] } });
    peer.close();
  });

  it('reports undecodable EJSON in params as a parse error', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'method', id: '1', method: 'echo', params: [{ $type: 'unknown-type', $value: 1 }] });
    assert.equal((await peer.next()).reason, 'Parse error');
    peer.send({ msg: 'method', id: '2', method: 'echo', params: [{ $binary: '***' }] });
    assert.equal((await peer.next()).reason, 'Parse error');
    peer.close();
  });

  it('closes a raw WebSocket that sends a message beyond the limit (1009), and only that one', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    const { result } = await peer.call('small', 'size', ['x'.repeat(1000)]);
    assert.equal(result.result, 1000);
    peer.send({ msg: 'method', id: 'big', method: 'size', params: ['x'.repeat(10 * 1024 * 1024)] });
    assert.equal((await peer.waitClosed()).code, 1009);
    await bystanderWorks();
  });

  it('answers a message beyond the limit in a SockJS frame with an error and keeps the connection working', async () => {
    const peer = await SockjsPeer.open(`${t.url}/sockjs`, 'websocket');
    assert.equal(await peer.call('small', 'size', ['x'.repeat(1000)]), 1000);
    peer.send({ msg: 'method', id: 'big', method: 'size', params: ['x'.repeat(1024 * 1024 + 10)] });
    const refused = await peer.next((m) => m.msg === 'error');
    assert.match(refused.reason as string, /^Message too large \(\d+ bytes; the limit is 1048576\)$/);
    assert.equal(await peer.call('after', 'size', ['x'.repeat(10)]), 10);
    peer.close();
  });

  it('closes on invalid UTF-8 in a text frame (1007)', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    peer.ws.send(Buffer.from([0x22, 0xc3, 0x28, 0x22]), { binary: false });
    assert.equal((await peer.waitClosed()).code, 1007);
    await bystanderWorks();
  });

  it('answers 10,000 pipelined method calls, in order, without loss', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    const n = 10000;
    for (let i = 0; i < n; i++) peer.send(`{"msg":"method","id":"${i}","method":"echo","params":[${i}]}`);
    const results: number[] = [];
    await peer.next((m) => {
      if (m.msg === 'result') results.push(m.result as number);
      return results.length === n;
    }, 30000);
    assert.deepEqual(results, Array.from({ length: n }, (_, i) => i));
    await bystanderWorks();
    peer.close();
  });

  it('answers 10,000 rapid pings and 10,000 garbage frames', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    for (let i = 0; i < 10000; i++) peer.send({ msg: 'ping', id: String(i) });
    for (let i = 0; i < 10000; i++) peer.send('{garbage');
    let pongs = 0;
    let errors = 0;
    await peer.next((m) => {
      if (m.msg === 'pong') pongs++;
      if (m.msg === 'error') errors++;
      return pongs === 10000 && errors === 10000;
    }, 30000);
    await bystanderWorks();
    peer.close();
  });

  it('keeps working after a short seeded fuzz run, and loses no acknowledged write', async () => {
    const watcher = await RawPeer.connected(t.wsUrl);
    watcher.send({ msg: 'sub', id: 'w', name: 'all' });
    await watcher.next((m) => m.msg === 'ready');
    const random = createWithSeeds('fuzz', 1);
    const fuzzers = await Promise.all([1, 2, 3].map(() => RawPeer.connected(t.wsUrl)));
    const acknowledged: string[] = [];
    let sent = 0;
    for (let round = 0; round < 300; round++) {
      for (const [i, peer] of fuzzers.entries()) {
        for (const text of fuzzMessages(random, 5)) {
          peer.send(text);
          sent++;
        }
        const id = `ok-${i}-${round}`;
        peer.send({ msg: 'method', id, method: 'add', params: [{ _id: id }] });
      }
    }
    assert.equal(sent, 4500);
    for (const [i, peer] of fuzzers.entries()) {
      // Every valid call among the garbage is answered, in order, and succeeds: none is lost or refused.
      await peer.next((m) => m.msg === 'result' && m.id === `ok-${i}-299`, 20000);
      const answers = peer.received.filter((m) => m.msg === 'result' && typeof m.id === 'string' && m.id.startsWith(`ok-${i}-`));
      assert.deepEqual(
        answers.map((m) => [m.id, m.error ?? null]),
        Array.from({ length: 300 }, (_, round) => [`ok-${i}-${round}`, null]),
      );
      assert.equal(peer.closed, undefined, 'the fuzzed connection stays open');
      acknowledged.push(...answers.map((m) => m.id as string));
      peer.close();
    }
    assert.equal(acknowledged.length, 900);
    for (const id of acknowledged) assert.ok(await items.findOneAsync(id), `acknowledged insert ${id} is stored`);
    const seen = new Set<string>();
    await watcher.next((m) => {
      if (m.msg === 'added') seen.add(m.id as string);
      return acknowledged.every((id) => seen.has(id));
    }, 10000);
    watcher.close();
    await bystanderWorks();
  });
});
