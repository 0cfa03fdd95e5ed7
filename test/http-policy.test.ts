/**
 * Who may do what over HTTP: `/perseid/stats` only from the server itself or
 * with the admin token (proxies counted, so a proxy on the same host does not
 * make every visitor loopback); DDP only from pages of allowed origins, on
 * both transports and in SockJS's CORS answers; static files not sniffable
 * and under a Content-Security-Policy.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import tasksApp from '../examples/tasks/app.js';
import { createServer, type PerseidServer } from '../src/server/app.js';
import type { Logger } from '../src/log.js';
import { DEFAULT_CONTENT_SECURITY_POLICY } from '../src/server/http.js';
import { httpRequest, openRawWebSocket, SockjsXhrSession } from '../scripts/fuzz/wire.js';
import { RawPeer, startServer, type TestServer } from './helpers.js';
import { eventually } from './processes.js';

const externalAddress = Object.values(networkInterfaces())
  .flat()
  .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;

describe('/perseid/stats', () => {
  it('answers loopback and refuses another address (403)', async (t) => {
    if (!externalAddress) return t.skip('this machine has no non-loopback IPv4 address to ask from');
    const server = createServer();
    const { port } = await server.listen(0, '0.0.0.0');
    try {
      assert.equal((await fetch(`http://127.0.0.1:${port}/perseid/stats`)).status, 200);
      const refused = await fetch(`http://${externalAddress}:${port}/perseid/stats`);
      assert.equal(refused.status, 403);
      assert.match(await refused.text(), /loopback/);
      assert.equal((await fetch(`http://${externalAddress}:${port}/health`)).status, 200, '/health stays public');
    } finally {
      await server.close();
    }
  });

  it('behind a proxy, judges the forwarded address, not the proxy on loopback', async () => {
    const t = await startServer(() => undefined, { httpForwardedCount: 1 });
    try {
      const ask = (headers: Record<string, string>) => httpRequest(t.port, 'GET', '/perseid/stats', undefined, headers);
      assert.equal((await ask({ 'x-forwarded-for': '203.0.113.5' })).status, 403);
      assert.equal((await ask({ 'x-forwarded-for': '127.0.0.1, 203.0.113.5' })).status, 403, 'only the last hop counts with one proxy');
      assert.equal((await ask({})).status, 403, 'no forwarded address: not known to be loopback');
      assert.equal((await ask({ 'x-forwarded-for': '127.0.0.1' })).status, 200);
    } finally {
      await t.close();
    }
  });

  it('with an admin token, wants it from everyone, loopback included', async () => {
    const t = await startServer(() => undefined, { adminToken: 's3cret-token' });
    try {
      const ask = (headers: Record<string, string>) => httpRequest(t.port, 'GET', '/perseid/stats', undefined, headers);
      const missing = await ask({});
      assert.equal(missing.status, 401);
      assert.match(String(missing.headers['www-authenticate']), /^Bearer/);
      assert.equal((await ask({ authorization: 'Bearer wrong' })).status, 401);
      assert.equal((await ask({ authorization: 'Bearer s3cret-token-and-more' })).status, 401);
      assert.equal((await ask({ authorization: 'Basic s3cret-token' })).status, 401);
      const allowed = await ask({ authorization: 'Bearer s3cret-token' });
      assert.equal(allowed.status, 200);
      assert.ok('perseid_sessions' in (JSON.parse(allowed.body) as Record<string, unknown>));
    } finally {
      await t.close();
    }
  });

  it('refuses a token no request can send when the server is made (a space inside, a letter outside ASCII): every request got 401', () => {
    for (const adminToken of ['open sesame', 'pässwort']) {
      assert.throws(() => createServer({ adminToken }), {
        name: 'TypeError',
        message: 'PERSEID_ADMIN_TOKEN may hold only visible ASCII characters, no spaces: no request could send it as Authorization: Bearer <token>',
      });
    }
  });

  it('takes a token read from a file ending in a newline as the token, which is all a request can send', async () => {
    const t = await startServer(() => undefined, { adminToken: 's3cret-token\n' });
    try {
      assert.equal((await fetch(`${t.url}/perseid/stats`, { headers: { authorization: 'Bearer s3cret-token\n' } })).status, 200);
      assert.equal((await httpRequest(t.port, 'GET', '/perseid/stats', undefined, { authorization: 'Bearer s3cret-token' })).status, 200);
      assert.equal((await httpRequest(t.port, 'GET', '/perseid/stats', undefined, {})).status, 401);
    } finally {
      await t.close();
    }
  });
});

describe('a proxy in front with HTTP_FORWARDED_COUNT unset', () => {
  it('is said once, at the first connection that came through it, before per-address limits count the whole site as one address', async () => {
    const lines: string[] = [];
    const logger: Logger = { debug: () => undefined, info: () => undefined, warn: (m, f) => lines.push(`${m} ${JSON.stringify(f)}`), error: () => undefined, child: () => logger };
    const t = await startServer(() => undefined, { logger, httpForwardedCount: 0 });
    try {
      const direct = await openRawWebSocket(t.port);
      direct.socket.destroy();
      assert.deepEqual(lines, [], 'nothing for a connection without X-Forwarded-For');
      for (const client of ['203.0.113.7', '203.0.113.8']) (await openRawWebSocket(t.port, '/websocket', { 'X-Forwarded-For': client })).socket.destroy();
      await eventually(() => lines.length > 0, 'the warning');
      assert.equal(lines.length, 1, lines.join('\n'));
      assert.match(lines[0]!, /HTTP_FORWARDED_COUNT is not set: every client behind that proxy counts as its address/);
    } finally {
      await t.close();
    }
  });
});

describe('allowed origins', () => {
  let t: TestServer;
  let open: TestServer;
  before(async () => {
    const setup = (server: PerseidServer) => server.methods({ echo: (x: unknown) => x });
    t = await startServer(setup, { allowedOrigins: ['https://app.example.com'] });
    open = await startServer(setup, { allowedOrigins: '*' });
  });
  after(async () => {
    await t.close();
    await open.close();
  });

  const upgrade = async (server: TestServer, path: string, headers: Record<string, string>) => {
    const { socket, response } = await openRawWebSocket(server.port, path, headers);
    socket.destroy();
    return Number(/^HTTP\/1.1 (\d+)/.exec(response)?.[1]);
  };

  for (const path of ['/websocket', '/sockjs/123/abcdef/websocket']) {
    it(`refuses a WebSocket on ${path} from a page of another origin (403), and takes its own, loopback and listed ones`, async () => {
      assert.equal(await upgrade(t, path, { Origin: 'https://evil.example' }), 403);
      assert.equal(await upgrade(t, path, { Origin: 'null' }), 403);
      assert.equal(await upgrade(t, path, {}), 101, 'programs send no Origin');
      assert.equal(await upgrade(t, path, { Origin: `http://127.0.0.1:${t.port}` }), 101);
      assert.equal(await upgrade(t, path, { Origin: 'http://localhost:5173' }), 101, 'any loopback page');
      assert.equal(await upgrade(t, path, { Origin: 'https://app.example.com' }), 101, 'a listed origin');
      assert.equal(await upgrade(t, path, { Origin: 'https://my.site.example', Host: 'my.site.example' }), 101, "the server's own host");
      assert.equal(await upgrade(t, path, { Origin: 'http://my.site.example:8080', Host: 'my.site.example:8080' }), 101);
      assert.equal(await upgrade(t, path, { Origin: 'https://my.site.example.evil.example', Host: 'my.site.example' }), 403);
      assert.equal(await upgrade(open, path, { Origin: 'https://evil.example' }), 101, '* allows any');
    });
  }

  it('honours X-Forwarded-Host as the own host only behind a proxy', async () => {
    const proxied = await startServer(() => undefined, { httpForwardedCount: 1, allowedOrigins: [] });
    try {
      const headers = { Origin: 'https://public.example', 'X-Forwarded-Host': 'public.example' };
      assert.equal(await upgrade(proxied, '/websocket', headers), 101);
      assert.equal(await upgrade(t, '/websocket', headers), 403);
    } finally {
      await proxied.close();
    }
  });

  it('refuses SockJS requests from another origin and reflects only allowed ones in CORS, with credentials', async () => {
    const evil = await httpRequest(t.port, 'POST', '/sockjs/1/evilsession/xhr', '', { origin: 'https://evil.example' });
    assert.equal(evil.status, 403);
    assert.equal(evil.headers['access-control-allow-origin'], undefined);
    const info = await httpRequest(t.port, 'GET', '/sockjs/info', undefined, { origin: 'https://evil.example' });
    assert.equal(info.status, 403);
    const preflight = await httpRequest(t.port, 'OPTIONS', '/sockjs/1/evilsession/xhr_send', undefined, { origin: 'https://evil.example' });
    assert.equal(preflight.status, 403);
    const session = await SockjsXhrSession.open(t.port, { origin: 'https://app.example.com' });
    const sent = await session.send([JSON.stringify({ msg: 'connect', version: '1', support: ['1'] })]);
    assert.equal(sent.headers['access-control-allow-origin'], 'https://app.example.com');
    assert.equal(sent.headers['access-control-allow-credentials'], 'true');
    assert.ok((await session.poll()).messages.some((m) => m.includes('"connected"')));
    const mine = await httpRequest(t.port, 'GET', '/sockjs/info', undefined, { origin: 'https://app.example.com' });
    assert.equal(mine.status, 200);
    assert.equal(mine.headers['access-control-allow-origin'], 'https://app.example.com');
  });

  it('refuses /sockjs/info from another origin when a balancer answers it too', async () => {
    t.server.routeConnections({ id: 'this-server', sockjsBaseUrl: () => undefined, upgradeTarget: () => undefined, passedOnByPeer: () => false, peerOrigins: () => [], serverSummaries: () => [] });
    const evil = await httpRequest(t.port, 'GET', '/sockjs/info', undefined, { origin: 'https://evil.example' });
    assert.equal(evil.status, 403);
    const mine = await httpRequest(t.port, 'GET', '/sockjs/info', undefined, { origin: 'https://app.example.com' });
    assert.equal(mine.status, 200);
    assert.equal(mine.headers['access-control-allow-origin'], 'https://app.example.com');
  });

  it("lets pages of the cluster's other servers connect, and widens the pages' connect-src to them", async () => {
    const clustered = await startServer((server) => tasksApp(server), { allowedOrigins: [] });
    try {
      clustered.server.routeConnections({ id: 'this-server', sockjsBaseUrl: () => undefined, upgradeTarget: () => undefined, passedOnByPeer: () => false, peerOrigins: () => ['https://b.example'], serverSummaries: () => [] });
      assert.equal(await upgrade(clustered, '/websocket', { Origin: 'https://b.example' }), 101);
      assert.equal(await upgrade(clustered, '/websocket', { Origin: 'https://c.example' }), 403);
      const policy = (await fetch(`${clustered.url}/`)).headers.get('content-security-policy');
      assert.match(String(policy), /connect-src 'self' https:\/\/b\.example wss:\/\/b\.example;/);
    } finally {
      await clustered.close();
    }
  });

  it("lets a page of another origin import the browser client, which a module script needs CORS for", async () => {
    // Chromium refused import('http://127.0.0.1:<port>/perseid/client.js') from http://localhost:5173 and from a listed origin.
    for (const origin of ['http://localhost:5173', 'https://app.example.com', 'null']) {
      const reply = await fetch(`${t.url}/perseid/client.js`, { headers: { Origin: origin } });
      assert.equal(reply.status, 200, origin);
      assert.equal(reply.headers.get('access-control-allow-origin'), '*', origin);
      assert.equal(reply.headers.get('access-control-allow-credentials'), null, 'no credentials: it is public code');
    }
  });

  it('keeps working for clients that send no Origin', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    assert.equal((await peer.call('1', 'echo', ['hi'])).result.result, 'hi');
    peer.close();
  });
});

describe('static files', () => {
  let t: TestServer;
  before(async () => {
    t = await startServer((server) => tasksApp(server));
  });
  after(() => t.close());

  it('are sent with nosniff and the default Content-Security-Policy', async () => {
    for (const path of ['/', '/tasks.js', '/style.css']) {
      const reply = await fetch(`${t.url}${path}`);
      assert.equal(reply.status, 200, path);
      assert.equal(reply.headers.get('x-content-type-options'), 'nosniff', path);
      assert.equal(reply.headers.get('content-security-policy'), DEFAULT_CONTENT_SECURITY_POLICY, path);
    }
    for (const path of ['/perseid/client.js', '/health', '/nothing-here']) {
      assert.equal((await fetch(`${t.url}${path}`)).headers.get('x-content-type-options'), 'nosniff', path);
    }
  });

  it('take another policy, or none', async () => {
    for (const [policy, expected] of [
      ["default-src 'self' https://cdn.example", "default-src 'self' https://cdn.example"],
      [false, null],
    ] as const) {
      const other = await startServer((server) => tasksApp(server), { contentSecurityPolicy: policy });
      try {
        assert.equal((await fetch(`${other.url}/`)).headers.get('content-security-policy'), expected);
      } finally {
        await other.close();
      }
    }
  });

  it('refuse a policy no header can carry when the server is made, not at the first page (which stopped the server)', () => {
    // What a YAML literal block (|) gives an environment variable: the policy over several lines.
    assert.throws(() => createServer({ contentSecurityPolicy: "default-src 'self';\nimg-src 'self'" }), {
      name: 'TypeError',
      message: 'The Content-Security-Policy must be one line, without a newline or other control character (in YAML, a folded block: >-)',
    });
  });

  it('warn once, naming the directory, when the one given does not exist (a relative path is from the working directory)', () => {
    const lines: string[] = [];
    const logger: Logger = { debug: () => undefined, info: () => undefined, warn: (m, f) => lines.push(`${m} ${JSON.stringify(f)}`), error: () => undefined, child: () => logger };
    createServer({ logger }).serveStatic('no-such-public-dir');
    assert.equal(lines.length, 1, lines.join('\n'));
    assert.match(lines[0]!, /does not exist/);
    assert.ok(lines[0]!.includes(join(process.cwd(), 'no-such-public-dir')), lines[0]);
    const publicDir = mkdtempSync(join(tmpdir(), 'perseid-public-'));
    createServer({ logger }).serveStatic(publicDir);
    assert.equal(lines.length, 1, 'no warning for a directory that exists');
    writeFileSync(join(publicDir, 'index.html'), '<p>hi</p>');
    createServer({ logger }).serveStatic(join(publicDir, 'index.html'));
    assert.equal(lines.length, 2, 'a warning for a file given as the directory');
    assert.match(lines[1]!, /is a file, not a directory/);
  });
});
