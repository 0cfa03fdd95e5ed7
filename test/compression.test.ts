/**
 * permessage-deflate on the wire: negotiated, used only for messages at or above
 * the threshold, one compressed frame shared by every client that receives a
 * message, and off entirely when configured so. Read from raw frames (RSV1 bit).
 */
import assert from 'node:assert/strict';
import type { Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { constants, inflateRawSync } from 'node:zlib';
import type { Collection } from '../src/collections/collection.js';
import { FrameReader, openRawWebSocket, textFrame } from '../scripts/fuzz/wire.js';
import { startServer, type TestServer } from './helpers.js';

interface Frame {
  compressed: boolean;
  raw: Buffer;
  text: string;
}

/** A WebSocket peer that keeps every frame as received. */
class FramePeer {
  readonly frames: Frame[] = [];
  extensions = '';
  private readonly reader = new FrameReader();
  private constructor(private readonly socket: Socket) {}

  static async open(port: number, offerDeflate: boolean): Promise<FramePeer> {
    const offer: Record<string, string> = offerDeflate ? { 'Sec-WebSocket-Extensions': 'permessage-deflate; client_max_window_bits' } : {};
    const { socket, response, rest } = await openRawWebSocket(port, '/websocket', offer);
    if (!response.startsWith('HTTP/1.1 101')) {
      socket.destroy();
      throw new Error(response);
    }
    const peer = new FramePeer(socket);
    peer.extensions = /sec-websocket-extensions: (.*)/i.exec(response)?.[1] ?? '';
    socket.on('data', (d: Buffer) => peer.receive(d));
    peer.receive(rest);
    socket.resume();
    return peer;
  }

  send(message: unknown): void {
    this.socket.write(textFrame(JSON.stringify(message)));
  }

  async next(match: (f: Frame) => boolean): Promise<Frame> {
    for (let i = 0; i < 200; i++) {
      const found = this.frames.find(match);
      if (found) return found;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`no matching frame; got ${this.frames.map((f) => f.text.slice(0, 60)).join(' | ')}`);
  }

  close(): void {
    this.socket.destroy();
  }

  private receive(chunk: Buffer): void {
    for (const frame of this.reader.push(chunk)) {
      const text = frame.rsv1 ? inflateRawSync(Buffer.concat([frame.payload, Buffer.from([0, 0, 0xff, 0xff])]), { finishFlush: constants.Z_SYNC_FLUSH }).toString() : frame.payload.toString();
      this.frames.push({ compressed: frame.rsv1, raw: Buffer.from(frame.raw), text });
    }
  }
}

async function handshake(peer: FramePeer): Promise<void> {
  peer.send({ msg: 'connect', version: '1', support: ['1'] });
  await peer.next((f) => f.text.includes('"connected"'));
}

describe('WebSocket compression', () => {
  let t: TestServer;
  let docs: Collection;
  before(async () => {
    t = await startServer((server, { collection }) => {
      docs = collection('compressed');
      server.methods({ text: (size: unknown) => 'x'.repeat(size as number), add: (doc: unknown) => docs.insertAsync(doc as object) });
      server.publish('all', () => docs.find());
    });
  });
  after(() => t.close());

  it('negotiates permessage-deflate with no server context takeover', async () => {
    const peer = await FramePeer.open(t.port, true);
    assert.match(peer.extensions, /permessage-deflate/);
    assert.match(peer.extensions, /server_no_context_takeover/);
    peer.close();
  });

  it('compresses only messages at or above the threshold, and they inflate to the message', async () => {
    const peer = await FramePeer.open(t.port, true);
    await handshake(peer);
    peer.send({ msg: 'method', id: 'small', method: 'text', params: [100] });
    peer.send({ msg: 'method', id: 'large', method: 'text', params: [5000] });
    const small = await peer.next((f) => f.text.includes('"id":"small"') && f.text.includes('result'));
    const large = await peer.next((f) => f.text.includes('"id":"large"') && f.text.includes('result'));
    assert.equal(small.compressed, false);
    assert.equal(large.compressed, true);
    assert.equal((JSON.parse(large.text) as { result: string }).result, 'x'.repeat(5000));
    assert.ok(large.raw.length < 200, `5000 repeated bytes compress well (${large.raw.length} bytes on the wire)`);
    peer.close();
  });

  it('sends one shared compressed frame to every subscriber, and plain frames to a client that did not offer compression', async () => {
    const a = await FramePeer.open(t.port, true);
    const b = await FramePeer.open(t.port, true);
    const plain = await FramePeer.open(t.port, false);
    assert.equal(plain.extensions, '');
    for (const peer of [a, b, plain]) {
      await handshake(peer);
      peer.send({ msg: 'sub', id: 's', name: 'all' });
      await peer.next((f) => f.text.includes('"ready"'));
    }
    a.send({ msg: 'method', id: 'm', method: 'add', params: [{ _id: 'big', body: 'lorem ipsum '.repeat(500) }] });
    const [fa, fb, fp] = await Promise.all([a, b, plain].map((p) => p.next((f) => f.text.includes('"added"') && f.text.includes('"big"'))));
    assert.equal(fa!.compressed, true);
    assert.deepEqual(fa!.raw, fb!.raw, 'byte-identical frames');
    assert.equal(fp!.compressed, false);
    assert.equal(fp!.text, fa!.text);
    for (const peer of [a, b, plain]) peer.close();
  });
});

describe('WebSocket compression turned off', () => {
  let t: TestServer;
  before(async () => {
    t = await startServer((server) => server.methods({ text: (size: unknown) => 'x'.repeat(size as number) }), { compression: false });
  });
  after(() => t.close());

  it('does not negotiate it, and sends large messages plain', async () => {
    const peer = await FramePeer.open(t.port, true);
    assert.equal(peer.extensions, '');
    await handshake(peer);
    peer.send({ msg: 'method', id: 'large', method: 'text', params: [5000] });
    const large = await peer.next((f) => f.text.includes('"id":"large"') && f.text.includes('result'));
    assert.equal(large.compressed, false);
    peer.close();
  });
});
