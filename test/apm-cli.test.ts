/**
 * The APM from the command line, as real processes: `perseid start
 * --admin-port` serves the operational endpoints on their own port only, and
 * `perseid top`, `perseid advise` and `perseid capacity` read them, with the
 * admin token when the server wants one, and say in one line what to do when
 * they cannot.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CLI, eventually, startPerseid, type PerseidProcess } from './processes.js';
import { RawPeer, startServer } from './helpers.js';
import { topScreen } from '../src/cli/apm.js';
import type { JobSummary } from '../src/jobs/jobs-metrics.js';
import type { DashboardView } from '../src/metrics/dashboard-view.js';
import { freePort } from '../scripts/services/process.js';


function perseid(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, PERSEID_ADMIN_TOKEN: '', ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('perseid top, advise and capacity against perseid start --admin-port', () => {
  let server: PerseidProcess;
  let adminUrl = '';
  const dir = mkdtempSync(join(tmpdir(), 'perseid-apm-cli-'));

  before(async () => {
    const adminPort = await freePort();
    adminUrl = `http://127.0.0.1:${adminPort}`;
    server = await startPerseid('dist/examples/tasks/app.js', ['--port', '0', '--data-dir', join(dir, 'data'), '--admin-port', String(adminPort)], { PERSEID_ADMIN_TOKEN: 'cli-token-1' });
  });

  after(async () => {
    await server?.stop('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the operational endpoints on the admin port only', async () => {
    for (const path of ['/metrics', '/perseid/dashboard', '/perseid/stats']) {
      assert.equal((await fetch(server.url + path)).status, 404, `${path} on the main port`);
      assert.equal((await fetch(adminUrl + path)).status, 401, `${path} on the admin port wants the token`);
    }
    assert.equal((await fetch(`${adminUrl}/metrics`, { headers: { authorization: 'Bearer cli-token-1' } })).status, 200);
    assert.equal((await fetch(`${adminUrl}/websocket`)).status, 404, 'the admin port serves no clients');
  });

  it('shows the figures of calls a client made, with the token', async () => {
    const peer = await RawPeer.connected(`${server.url.replace(/^http/, 'ws')}/websocket`);
    try {
      await peer.call('1', 'insertTask', [{ description: 'from the cli test', sessionId: 'cli' }]);
      const top = await perseid(['top', '--url', adminUrl, '--once', '--token', 'cli-token-1']);
      assert.equal(top.code, 0, top.stderr);
      assert.match(top.stdout, /^insertTask +1 +0 /m);
      assert.match(top.stdout, /Slowest calls/);
      assert.match(top.stdout, /method insertTask/);
      assert.match(top.stdout, /^Traffic: new sessions websocket \d+; in \d+ messages/m);
      const capacity = await perseid(['capacity', '--url', adminUrl, '--sessions', '5000', '--cpu', '60'], { PERSEID_ADMIN_TOKEN: 'cli-token-1' });
      assert.equal(capacity.code, 0, capacity.stderr);
      assert.match(capacity.stdout, /^1 sessions, 0 users over 1 process\(es\)/m);
      assert.match(capacity.stdout, /^5000 sessions at 60 % CPU need \d+ instance\(s\)/m);
      const advise = await perseid(['advise', '--url', adminUrl, '--json', '--token', 'cli-token-1']);
      assert.equal(advise.code, 0, advise.stderr);
      assert.ok(Array.isArray(JSON.parse(advise.stdout)));
      // The address `perseid start` logs for the dashboard, pasted as it is.
      const pasted = await perseid(['top', '--url', `${adminUrl}/perseid/dashboard`, '--once', '--token', 'cli-token-1']);
      assert.equal(pasted.code, 0, pasted.stderr);
      assert.match(pasted.stdout, /^insertTask +1 +0 /m);
    } finally {
      peer.ws.close();
    }
  });

  it('ends quietly when the reader of its output goes away (perseid top --json | head)', async () => {
    const child = spawn(process.execPath, [CLI, 'top', '--json', '--interval', '200', '--url', adminUrl, '--token', 'cli-token-1'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await new Promise((resolve) => child.stdout.once('data', resolve));
    child.stdout.destroy();
    const code = await Promise.race([exit, new Promise<string>((resolve) => setTimeout(() => resolve('still running'), 5000))]);
    if (code === 'still running') child.kill('SIGKILL');
    assert.equal(code, 0, stderr);
    assert.equal(stderr, '');
  });

  it('says in one line what to do without the token, at a wrong address, with a bad flag or PERSEID_APM', async () => {
    const refused = await perseid(['top', '--url', adminUrl, '--once']);
    assert.equal(refused.code, 1);
    assert.equal(refused.stderr, `perseid top: ${adminUrl} wants its admin token: pass --token or set PERSEID_ADMIN_TOKEN\n`);
    const closed = await perseid(['advise', '--url', `http://127.0.0.1:${await freePort()}`]);
    assert.equal(closed.code, 1);
    assert.match(closed.stderr, /^perseid advise: cannot reach http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\): is the server running there\? \(--url\)\n$/);
    const mainPort = await perseid(['advise', '--url', server.url, '--token', 'cli-token-1']);
    assert.equal(mainPort.code, 1);
    assert.match(mainPort.stderr, /is not found: is it a Perseid server \(with --admin-port, use that port\)\?\n$/);
    const wrongToken = await perseid(['top', '--url', adminUrl, '--once', '--token', 'not-the-token']);
    assert.equal(wrongToken.code, 1);
    assert.equal(wrongToken.stderr, `perseid top: ${adminUrl} refused the admin token given (--token or PERSEID_ADMIN_TOKEN): give the server's PERSEID_ADMIN_TOKEN\n`);
    // The 404 names the address asked, below the --url's own path, not one the server does answer.
    const prefixed = await perseid(['advise', '--url', `${adminUrl}/app`, '--token', 'cli-token-1']);
    assert.equal(prefixed.code, 1);
    assert.equal(prefixed.stderr, `perseid advise: ${adminUrl}/app/perseid/advice is not found: is it a Perseid server (with --admin-port, use that port)?\n`);
    // A ws:// URL (what a DDP client is given) is no address of the operational endpoints, not a server that is down.
    const wsUrl = await perseid(['top', '--once', '--url', adminUrl.replace('http', 'ws')]);
    assert.equal(wsUrl.code, 2);
    assert.match(wsUrl.stderr, /^perseid top: --url must be an http\(s\) URL \(got ws:\/\/127\.0\.0\.1:\d+\)\n/);
    const bad = await perseid(['capacity', '--url', adminUrl, '--sessions', 'lots']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /^perseid capacity: --sessions must be an integer/);
    const unknownSetting = await perseid(['start', 'dist/examples/tasks/app.js', '--port', '0'], { PERSEID_APM: 'maybe' });
    assert.equal(unknownSetting.code, 2);
    assert.match(unknownSetting.stderr, /^perseid start: PERSEID_APM must be on or off \(got maybe\)\n/);
  });
});

describe('perseid top, advise and capacity against a server that is not this Perseid', () => {
  let site: Server;
  let url = '';

  before(async () => {
    // A web server whose page answers every path (a single-page app's fallback), and a Perseid of
    // an earlier release, whose dashboard had no traffic row nor servers table yet.
    site = createServer((req, res) => {
      if (req.url?.startsWith('/old/perseid/dashboard.json')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ at: Date.now(), processes: [], methods: [], publications: [], traces: [], errors: [], advice: [], capacity: {} }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><title>Shop</title>');
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  });

  after(() => new Promise<void>((resolve) => site.close(() => resolve())));

  it('says a server that takes the connection and does not answer is up but busy, not unreachable', { timeout: 20000 }, async () => {
    // What a server whose event loop is blocked looks like from outside: the kernel accepts, nothing answers.
    const held: Socket[] = [];
    const silent = createTcpServer((socket) => void held.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const run = await perseid(['top', '--once', '--url', `http://127.0.0.1:${(silent.address() as AddressInfo).port}`]);
      assert.equal(run.code, 1);
      assert.match(run.stderr, /^perseid top: http:\/\/127\.0\.0\.1:\d+ did not answer in 10 s: the server is up but busy \(its event loop blocked\?\), or it is not a Perseid server\n$/);
    } finally {
      for (const socket of held) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  it('says in one line that the answer is not the figures it reads, with no stack trace', async () => {
    for (const args of [['top', '--once', '--url', url], ['advise', '--url', url], ['capacity', '--sessions', '100', '--url', url], ['top', '--once', '--url', `${url}/old`]]) {
      const run = await perseid(args);
      assert.equal(run.code, 1, args.join(' '));
      assert.match(run.stderr, /^perseid (top|advise|capacity): http:\/\/127\.0\.0\.1:\d+(\/old)?\/perseid\/\S+ did not answer the figures this perseid reads: is it a Perseid server, of this version \(use the perseid the server runs\)\?\n$/, args.join(' '));
      assert.equal(run.stdout, '', args.join(' '));
    }
  });
});

describe('perseid top on a job that fails', () => {
  it('prints the job\'s last error beside its failed runs, as the dashboard does', async () => {
    const t = await startServer(async (server, { database }) => {
      server.jobs.define('nightly-export', () => {
        throw new Error('export bucket is gone');
      });
      await server.jobs.start({ database, pollMs: 50 });
    });
    try {
      await t.server.jobs.enqueue('nightly-export');
      let screen = '';
      await eventually(async () => {
        screen = topScreen((await (await fetch(`${t.url}/perseid/dashboard.json`)).json()) as DashboardView);
        return / 1 +1 /.test(screen.split('\n').find((l) => l.startsWith('nightly-export')) ?? '');
      }, 'the failed run in perseid top', 10000);
      assert.match(screen, /^Jobs\njob +runs +failed +avg ms +next run +last failure\nnightly-export +1 +1 +\d+ +– +\S+Z export bucket is gone$/m, screen);
    } finally {
      await t.close();
    }
  });

  it('keeps the last failure, and when it was, once a later run succeeded', async () => {
    let runs = 0;
    const t = await startServer(async (server, { database }) => {
      server.jobs.define('sync', () => {
        if (++runs === 1) throw new Error('upstream timed out');
      }, { retries: 0 });
      await server.jobs.start({ database, pollMs: 50 });
    });
    try {
      const view = async () => (await (await fetch(`${t.url}/perseid/dashboard.json`)).json()) as DashboardView;
      const sync = async () => ((await view()).jobs as { jobs: JobSummary[] }).jobs.find((j) => j.job === 'sync');
      await t.server.jobs.enqueue('sync');
      await eventually(async () => (await sync())?.failed === 1, 'the failed run', 10000);
      await t.server.jobs.enqueue('sync');
      await eventually(async () => (await sync())?.succeeded === 1, 'the run that succeeded', 10000);
      // A job failing now and then showed a count of failures with no error: only the latest run's was kept.
      const row = (await sync())!;
      assert.equal(row.lastError, 'upstream timed out');
      assert.ok(row.lastFailedAt! <= row.lastFinishedAt!, JSON.stringify(row));
      const screen = topScreen(await view());
      assert.match(screen, new RegExp(`^sync +2 +1 +\\d+ +– +${row.lastFailedAt} upstream timed out$`, 'm'), screen);
    } finally {
      await t.close();
    }
  });
});
