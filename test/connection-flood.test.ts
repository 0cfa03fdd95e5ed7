/**
 * Floods of connections that never send a request, against real processes:
 * a workers' primary holds at most the per-address limit of them past their
 * first second, each for at most 10 s, and serves other clients meanwhile; a server whose file
 * descriptors are all taken stays up and serves again once they are free.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { httpRequest } from '../scripts/fuzz/wire.js';
import { serviceUrl } from '../scripts/services/control.js';
import { freePort } from '../scripts/services/process.js';
import { freshDatabase } from './databases.js';
import { ddpConnects } from './helpers.js';
import { eventually, startPerseid, type PerseidProcess } from './processes.js';
import { needsServices } from './skips.js';

const APP = 'dist/test/fixtures/cluster-app.js';
const mongo = await serviceUrl('mongo-java-server');

/** Opens `count` connections from 127.0.0.1 that send nothing; resolves once each is open or refused. */
async function silentConnections(port: number, count: number): Promise<{ sockets: Socket[]; closed: () => number }> {
  let closed = 0;
  const sockets = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<Socket>((resolve) => {
          const socket = connect({ port, host: '127.0.0.1', localAddress: '127.0.0.1' });
          socket.on('close', () => closed++);
          socket.on('error', () => undefined);
          socket.once('connect', () => resolve(socket));
          socket.once('error', () => resolve(socket));
        }),
    ),
  );
  return { sockets, closed: () => closed };
}

/** Sends `count` WebSocket upgrade requests for `path`, each connection reset 0 to 3 ms after (as the answer comes). */
async function resetUpgrades(port: number, path: string, count: number): Promise<void> {
  const request = `GET ${path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`;
  for (let sent = 0; sent < count; sent += 50) {
    await Promise.all(
      Array.from(
        { length: 50 },
        (_, i) =>
          new Promise<void>((resolve) => {
            const socket = connect(port, '127.0.0.1', () => {
              socket.write(request);
              setTimeout(() => {
                socket.resetAndDestroy();
                resolve();
              }, i % 4);
            });
            socket.on('error', () => resolve());
          }),
      ),
    );
  }
}

describe('perseid start --workers 1: connections that never send a request', { skip: needsServices({ 'mongo-java-server': mongo }) }, () => {
  let primary: PerseidProcess;
  let database: ReturnType<typeof freshDatabase>;
  before(async () => {
    database = freshDatabase(mongo!);
    primary = await startPerseid(APP, ['--port', '0', '--workers', '1', '--max-connections-per-address', '50'], { MONGO_URL: database.url });
  });
  after(async () => {
    await primary?.stop('SIGINT');
    await database?.drop();
  });

  it('are held at most 50 from one address, for at most 10 s, while another client is served', async () => {
    // A burst that speaks at once is no flood: 150 requests at the same moment are all answered.
    const burst = await Promise.all(Array.from({ length: 150 }, () => httpRequest(primary.port, 'GET', '/health', '')));
    assert.deepEqual(new Set(burst.map((reply) => reply.status)), new Set([200]));
    const flood = await silentConnections(primary.port, 150);
    try {
      await eventually(() => flood.closed() >= 100, 'the 100 past the limit closed', 5000);
      await ddpConnects(primary.url, { localAddress: '127.0.0.2' });
      assert.equal(flood.closed(), 100, 'the 50 within the limit are still open');
      await eventually(() => flood.closed() === 150, 'the last 50 closed after 10 s of silence', 15000);
    } finally {
      for (const socket of flood.sockets) socket.destroy();
    }
  });
});

describe('a server out of file descriptors', () => {
  let dir: string;
  let server: PerseidProcess;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'perseid-fds-'));
    server = await startPerseid(APP, ['--port', '0', '--data-dir', dir, '--max-connections-per-address', '0']);
    // A small table of descriptors, filled by a flood from one address (no limit per address here).
    const limited = spawnSync('prlimit', [`--pid=${server.child.pid}`, '--nofile=256:256']);
    assert.equal(limited.status, 0, `prlimit: ${String(limited.stderr)}`);
  });
  after(async () => {
    await server?.stop('SIGINT');
    rmSync(dir, { recursive: true, force: true });
  });

  it('stays up while they are taken and serves again once they are free', async () => {
    const flood = await silentConnections(server.port, 400);
    try {
      // The APM samples every 2 s: three samples with no descriptor free.
      await new Promise((resolve) => setTimeout(resolve, 6500));
      assert.equal(server.child.exitCode, null, `the server stopped:\n${server.log()}`);
    } finally {
      for (const socket of flood.sockets) socket.destroy();
    }
    // The server frees its descriptors as it notices the closes: a client at once may still find none.
    const deadline = Date.now() + 10000;
    for (;;) {
      try {
        await ddpConnects(server.url, { localAddress: '127.0.0.2', timeoutMs: 3000 });
        break;
      } catch (error) {
        if (Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  });
});

describe('upgrade requests refused, reset by their client at once', () => {
  const survives = async (server: PerseidProcess, path: string) => {
    await resetUpgrades(server.port, path, 600);
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
    assert.equal(server.child.exitCode, null, `the process stopped:\n${server.log()}`);
  };

  it('stop no lone server (404 for a path that is not DDP\'s), and the admin port answers an upgrade request', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'perseid-resets-'));
    const adminPort = await freePort();
    const server = await startPerseid(APP, ['--port', '0', '--data-dir', dir, '--admin-port', String(adminPort)]);
    try {
      await survives(server, '/not-ddp');
      // The admin port takes no upgrades: the request is answered as any other there.
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect(adminPort, '127.0.0.1', () => socket.write('GET /metrics HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n'));
        const timer = setTimeout(() => {
          socket.destroy();
          reject(new Error('the admin port left an upgrade request unanswered for 3 s'));
        }, 3000);
        socket.once('data', (data) => {
          clearTimeout(timer);
          socket.destroy();
          resolve(String(data));
        });
      });
      assert.match(answer, /^HTTP\/1\.1 200/);
    } finally {
      await server.stop('SIGINT');
      rmSync(dir, { recursive: true, force: true });
    }
  });

  /** The app started with `args` on a fresh database survives resets of upgrades to `path`. */
  const survivesOnMongo = async (args: string[], path: string) => {
    const database = freshDatabase(mongo!);
    const started = await startPerseid(APP, ['--port', '0', ...args], { MONGO_URL: database.url });
    try {
      await survives(started, path);
    } finally {
      await started.stop('SIGINT');
      await database.drop();
    }
  };

  it('stop no workers\' primary (503 for a path that is not DDP\'s)', { skip: needsServices({ 'mongo-java-server': mongo }) }, () => survivesOnMongo(['--workers', '1'], '/not-ddp'));

  it('stop no jobs process (503 for every upgrade)', { skip: needsServices({ 'mongo-java-server': mongo }) }, () => survivesOnMongo(['--role', 'jobs'], '/websocket'));
});
