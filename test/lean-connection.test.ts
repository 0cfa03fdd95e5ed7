/**
 * The load generator's lean connection against a hand-driven WebSocket peer on
 * a real socket: awaited text found wherever the reads split it, near-misses
 * (`"id":"70"` for `"id":"7"`) not taken for it, control frames not counted as
 * messages, and the closing handshake.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { LeanConnection, type LeanCounters } from '../src/load/lean-connection.js';

/** An unmasked server frame. */
function frame(opcode: number, payload: Buffer | string): Buffer {
  const body = Buffer.from(payload);
  const header = body.length < 126 ? Buffer.from([0x80 | opcode, body.length]) : Buffer.from([0x80 | opcode, 126, body.length >> 8, body.length & 255]);
  return Buffer.concat([header, body]);
}

const text = (payload: string) => frame(0x1, payload);
const counters = (): LeanCounters => ({ messagesIn: 0, bytesIn: 0, messagesOut: 0, bytesOut: 0 });
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('lean load connection', () => {
  let server: Server;
  let url: URL;
  /** What each accepted peer does after the handshake. */
  let script: (socket: Socket) => Promise<void>;
  const sockets = new Set<Socket>();

  before(async () => {
    server = createServer({ noDelay: true }, (socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      let head = '';
      const onData = (chunk: Buffer) => {
        head += chunk.toString('latin1');
        if (!head.includes('\r\n\r\n')) return;
        socket.off('data', onData);
        socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
        void script(socket).catch(() => socket.destroy());
      };
      socket.on('data', onData);
      socket.on('error', () => undefined);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    url = new URL(`ws://127.0.0.1:${(server.address() as AddressInfo).port}/websocket`);
  });
  after(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });

  it('finds awaited text wherever the reads split it, and not in a near miss', async () => {
    const bytes = Buffer.concat([
      text('{"msg":"result","id":"70","result":"wrong"}'),
      frame(0x9, 'ws-level ping'),
      text('{"msg":"added","collection":"tasks","id":"abc","fields":{"n":1}}'),
      text('{"msg":"result","id":"7","result":"right"}'),
    ]);
    // Every split point near the awaited messages, each on a fresh connection.
    for (let split = 40; split < bytes.length; split += 3) {
      script = async (socket) => {
        await once(socket, 'data'); // as DDP servers do, speak only when spoken to
        socket.write(bytes.subarray(0, split));
        await pause(15);
        socket.write(bytes.subarray(split));
        await once(socket, 'data'); // the client's close frame, answered
        socket.end(frame(0x8, Buffer.from([0x03, 0xe8])));
      };
      const count = counters();
      const connection = await LeanConnection.open(url, count, 2000);
      const result = connection.readMessage('{"msg":"result","id":"7"', 2000);
      const added = connection.waitFor('{"msg":"added","collection":"tasks","id":"abc"', 2000);
      connection.send('{"msg":"connect","version":"1","support":["1"]}');
      const [message] = await Promise.all([result.promise, added.promise]);
      assert.equal(message.result, 'right', `split at byte ${split}`);
      await connection.close();
      assert.equal(count.messagesIn, 3, 'text frames are messages; the ping and the close frames are not');
    }
  });

  it('closes with the handshake and counts what the server sent before answering it', async () => {
    script = async (socket) => {
      await once(socket, 'data'); // the client's close frame
      // Sent after the client closed, before the server's close frame: still delivered, still counted.
      socket.write(Buffer.concat([text('{"msg":"changed","collection":"tasks","id":"abc","fields":{"n":2}}'), frame(0x8, Buffer.from([0x03, 0xe8]))]));
      socket.end();
    };
    const count = counters();
    const connection = await LeanConnection.open(url, count, 2000);
    const started = Date.now();
    await connection.close();
    assert.equal(count.messagesIn, 1);
    assert.ok(Date.now() - started < 1000, 'it did not wait for its timeout');
  });

  it('answers a server that closes first, and fails what is still awaited', async () => {
    let answered: Buffer | undefined;
    script = async (socket) => {
      socket.write(frame(0x8, Buffer.from([0x03, 0xe8])));
      [answered] = (await once(socket, 'data')) as [Buffer];
      socket.end();
    };
    const connection = await LeanConnection.open(url, counters(), 2000);
    const never = connection.waitFor('{"msg":"ready"', 2000);
    await assert.rejects(never.promise, /closed/);
    assert.equal(answered![0]! & 0x0f, 0x8, 'the client answered with a close frame');
  });
});
