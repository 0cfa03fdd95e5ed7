/**
 * The nginx and HAProxy configurations in deploy/, run for real (Debian's
 * packages) in front of two Perseid servers sharing mongo-java-server: raw
 * WebSocket connections reach both servers, SockJS sessions stick to one, and
 * a change written through one server reaches a client of the other.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import SimpleDDP from 'simpleddp';
import WebSocket from 'ws';
import { serviceUrl } from '../scripts/services/control.js';
import { freePort, portOpen } from '../scripts/services/process.js';
import { freshDatabase } from './databases.js';
import { needs, needsServices } from './skips.js';
import { eventually, exited, SockjsPeer, startPerseid, type PerseidProcess } from './processes.js';

const APP = 'dist/test/fixtures/cluster-app.js';
const mongo = await serviceUrl('mongo-java-server');

/** Debian installs both under /usr/sbin, which a non-root PATH may lack. */
function binary(name: string): string | undefined {
  for (const dir of [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/sbin']) if (dir && existsSync(join(dir, name))) return join(dir, name);
  return undefined;
}

interface Proxy {
  name: string;
  binary: string | undefined;
  /** Starts the proxy from the repository's configuration, rewritten for these ports and a private directory. */
  start(dir: string, listen: number, backends: [number, number]): ChildProcess;
}

function rewritePorts(config: string, listen: number, backends: [number, number]): string {
  return config.replaceAll('127.0.0.1:3000', `127.0.0.1:${listen}`).replaceAll('127.0.0.1:3001', `127.0.0.1:${backends[0]}`).replaceAll('127.0.0.1:3002', `127.0.0.1:${backends[1]}`);
}

const PROXIES: Proxy[] = [
  {
    name: 'nginx',
    binary: binary('nginx'),
    start(dir, listen, backends) {
      // Only what a private, unprivileged run needs changes: ports, and files nginx writes.
      const writable = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((kind) => {
        const path = join(dir, kind);
        mkdirSync(path);
        chmodSync(path, 0o777);
        return `    ${kind}_temp_path ${path};`;
      });
      const config = rewritePorts(readFileSync('deploy/nginx.conf', 'utf8'), listen, backends).replace(
        /^http \{$/m,
        ['http {', `    access_log ${join(dir, 'access.log')};`, ...writable].join('\n'),
      );
      const file = join(dir, 'nginx.conf');
      writeFileSync(file, config);
      const user = process.getuid?.() === 0 ? 'user root; ' : '';
      return spawn(this.binary!, ['-p', dir, '-c', file, '-g', `${user}daemon off; pid ${join(dir, 'nginx.pid')}; error_log stderr warn;`], { stdio: ['ignore', 'ignore', 'pipe'] });
    },
  },
  {
    name: 'HAProxy',
    binary: binary('haproxy'),
    start(dir, listen, backends) {
      const file = join(dir, 'haproxy.cfg');
      writeFileSync(file, rewritePorts(readFileSync('deploy/haproxy.cfg', 'utf8'), listen, backends));
      return spawn(this.binary!, ['-f', file, '-db'], { stdio: ['ignore', 'ignore', 'pipe'] });
    },
  },
];

interface Who {
  pid: number;
}
interface Item {
  id: string;
}

for (const proxy of PROXIES) {
  const skip = !proxy.binary ? needs(proxy.name, `apt-get install ${proxy.name}`) : needsServices({ 'mongo-java-server': mongo });

  describe(`${proxy.name} in front of two servers (deploy/)`, { skip }, () => {
    let dir: string;
    let database: ReturnType<typeof freshDatabase>;
    let servers: PerseidProcess[];
    let front: ChildProcess;
    let url: string;
    let stderr = '';
    const clients: SimpleDDP[] = [];
    const connect = async () => {
      const client = new SimpleDDP({ endpoint: `${url.replace(/^http/, 'ws')}/websocket`, SocketConstructor: WebSocket, reconnectInterval: 100, maxTimeout: 4000 });
      clients.push(client);
      await client.connect();
      return client;
    };

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), `perseid-${proxy.name.toLowerCase()}-`));
      chmodSync(dir, 0o755);
      database = freshDatabase(mongo!);
      const ports: [number, number] = [await freePort(), await freePort()];
      // Each server follows the database itself (no Redis): the plain mode behind a proxy.
      servers = await Promise.all(ports.map((port) => startPerseid(APP, ['--port', String(port)], { MONGO_URL: database.url, REDIS_URL: '' })));
      const listen = await freePort();
      front = proxy.start(dir, listen, ports);
      front.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      await eventually(() => portOpen(listen), `${proxy.name} to listen`, 10000).catch((error: Error) => {
        throw new Error(`${error.message}: ${stderr}`);
      });
      url = `http://127.0.0.1:${listen}`;
      // HAProxy marks servers up only after their first health checks.
      await eventually(async () => (await fetch(`${url}/health`).catch(() => undefined))?.status === 200, 'the servers behind the proxy', 10000);
    });
    after(async () => {
      await Promise.all(clients.map((c) => c.disconnect().catch(() => undefined)));
      if (front) {
        front.kill('SIGTERM');
        await exited(front);
      }
      await Promise.all((servers ?? []).map((s) => s.stop()));
      await database?.drop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('passes raw WebSocket connections to both servers', async () => {
      const who = await Promise.all(Array.from({ length: 16 }, async () => (await connect()).call<Who>('whoami')));
      const reached = new Set(who.map((w) => w.pid));
      assert.deepEqual(reached, new Set(servers.map((s) => s.child.pid)), 'both servers take connections');
    });

    it('keeps every request of a SockJS session on one server', async () => {
      for (const transport of ['xhr-polling', 'xhr-streaming']) {
        const peers = await Promise.all(Array.from({ length: 12 }, () => SockjsPeer.open(`${url}/sockjs`, transport)));
        try {
          const reached = new Set<number>();
          for (const [p, peer] of peers.entries()) {
            const answers = new Set<number>();
            for (let i = 0; i < 3; i++) answers.add(((await peer.call(`${p}-${i}`, 'whoami')) as Who).pid);
            assert.equal(answers.size, 1, `${transport}: a session's requests reached ${answers.size} servers`);
            reached.add([...answers][0]!);
          }
          assert.equal(reached.size, 2, `${transport}: sessions are spread over both servers`);
        } finally {
          for (const peer of peers) peer.close();
        }
      }
    });

    it('carries live data between clients of different servers', async () => {
      const pool = await Promise.all(Array.from({ length: 6 }, () => connect()));
      const pids = await Promise.all(pool.map(async (c) => (await c.call<Who>('whoami')).pid));
      const reader = pool[0]!;
      const writer = pool[pids.findIndex((pid) => pid !== pids[0])];
      assert.ok(writer, 'six connections reach both servers');
      await reader.subscribe('items').ready();
      const id = await writer.call<string>('addItem', 1, proxy.name);
      await eventually(() => reader.collection<Item>('items').fetch().some((item) => item.id === id), 'the item written on the other server', 10000);
    });
  });
}

// Fails loudly if the configurations stop parsing, even where a run above was skipped for want of MongoDB.
describe('deploy/ configurations', () => {
  for (const proxy of PROXIES) {
    it(`${proxy.name} accepts deploy/ as written`, { skip: proxy.binary ? false : needs(proxy.name, `apt-get install ${proxy.name}`) }, () => {
      const dir = mkdtempSync(join(tmpdir(), 'perseid-config-'));
      try {
        const check =
          proxy.name === 'nginx'
            ? spawnSync(proxy.binary!, ['-t', '-p', dir, '-c', join(process.cwd(), 'deploy/nginx.conf'), '-g', `pid ${join(dir, 'nginx.pid')}; error_log stderr;`], { encoding: 'utf8' })
            : spawnSync(proxy.binary!, ['-c', '-f', 'deploy/haproxy.cfg'], { encoding: 'utf8' });
        assert.equal(check.status, 0, check.stderr + check.stdout);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
