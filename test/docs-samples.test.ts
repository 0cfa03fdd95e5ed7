/**
 * Every code sample in docs/ and the README is tested, so none can rot:
 * a TypeScript or JavaScript block must name its file (`<!-- sample: path -->`
 * above it) and be that file exactly; each sample file is run (against a real
 * server from `startServer`, with real client calls, or in headless Chromium
 * for the README's page); and every `perseid` command line in a shell block
 * parses with its command's flags (and `create` runs for real).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createServer as createHttpServer } from 'node:http';
import { trace as otelTrace } from '@opentelemetry/api';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, describe, it } from 'node:test';
import { chromium } from 'playwright-core';
import { parseCommand, type CommandSpec } from '../src/cli/args.js';
import { adviseCommand, capacityCommand, topCommand } from '../src/cli/apm.js';
import { autoscaleCommand } from '../src/cli/autoscale.js';
import { createCommand } from '../src/cli/create.js';
import { devCommand } from '../src/cli/dev.js';
import { loadCommand } from '../src/cli/load.js';
import { startCommand } from '../src/cli/start.js';
import { storeCommand } from '../src/cli/store.js';
import { AccountsClient, DDPClient, type TokenStorage } from '../src/client/node.js';
import { runScenario } from '../src/load/run-scenario.js';
import { apm } from '../src/metrics/apm.js';
import type { PerseidServer } from '../src/server/app.js';
import { parseFencedBlocks, type FencedBlock } from './docs-blocks.js';
import { startServer, type TestServer } from './helpers.js';
import { CLI, eventually } from './processes.js';

const ROOT = resolve('.');
const CHROMIUM = process.env.CHROMIUM_PATH ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));

function pages(): string[] {
  const docs = readdirSync('docs', { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.md'))
    .map((f) => join('docs', f));
  return ['README.md', ...docs];
}

const blocks: Array<FencedBlock & { page: string }> = pages().flatMap((page) => parseFencedBlocks(readFileSync(page, 'utf8')).map((b) => ({ ...b, page })));

/** Imports a sample: TypeScript ones from their compiled copy in dist/, JavaScript ones as they are. */
async function sample<T>(path: string): Promise<T> {
  const file = /\.tsx?$/.test(path) ? join('dist', path.replace(/\.tsx?$/, '.js')) : path;
  return (await import(pathToFileURL(resolve(file)).href)) as T;
}

type Setup = (server: PerseidServer) => unknown;
async function serve(path: string): Promise<TestServer> {
  const mod = await sample<{ setup?: Setup; default?: Setup }>(path);
  const setup = mod.setup ?? mod.default;
  assert.equal(typeof setup, 'function', `${path} exports setup(server) or a default app function`);
  return startServer((server) => setup!(server));
}

/** Runs `check` with a client connected to a server running the sample at `path`. */
async function withServer(path: string, check: (client: DDPClient, t: TestServer) => Promise<void>): Promise<void> {
  const t = await serve(path);
  const client = new DDPClient(t.url);
  try {
    await check(client, t);
  } finally {
    client.disconnect();
    await t.close();
  }
}

/** What each sample does when run: one entry per file under docs/samples/. */
const RUNS: Record<string, () => Promise<void>> = {
  'docs/samples/getting-started/app.ts': () =>
    withServer('docs/samples/getting-started/app.ts', async (client) => {
      await client.subscribe('latestNotes').ready;
      const id = await client.call<string>('addNote', '  first note ');
      assert.equal(client.collection<{ text: string }>('notes').findOne(id)?.text, 'first note');
      await assert.rejects(client.call('addNote', ' '), { error: 400 });
    }),
  'docs/samples/methods/methods.ts': () =>
    withServer('docs/samples/methods/methods.ts', async (client) => {
      assert.equal(await client.call('vote', 'lunch', 'pizza'), 1);
      await assert.rejects(client.call('vote', 'lunch', 'salad'), { error: 'already-voted' });
      await assert.rejects(client.call('vote', 'lunch'), { error: 400 });
      assert.deepEqual(await client.call('report', 'lunch'), { pizza: 1 });
    }),
  'docs/samples/publications/cursors.ts': () =>
    withServer('docs/samples/publications/cursors.ts', async (client) => {
      const room = await client.call<string>('openRoom', 'general');
      await client.subscribe('openRooms').ready;
      assert.deepEqual(client.collection('rooms').findOne(room), { _id: room, name: 'general' }, 'fields: { name: 1 }');
      await client.subscribe('room', room).ready;
      const message = await client.call<string>('post', room, 'hello');
      assert.equal(client.collection<{ text: string }>('messages').findOne(message)?.text, 'hello');
      assert.equal(client.collection<{ open: boolean }>('rooms').findOne(room)?.open, true, 'merged with the room publication');
    }),
  'docs/samples/publications/low-level.ts': () =>
    withServer('docs/samples/publications/low-level.ts', async (client) => {
      const clock = client.collection<{ at: Date }>('clock');
      const sub = client.subscribe('clock', 100);
      await sub.ready;
      const first = clock.findOne('now')!.at.getTime();
      await eventually(() => clock.findOne('now')!.at.getTime() > first, 'the clock to change');
      sub.stop();
      await eventually(() => clock.findOne('now') === undefined, 'the clock to go with its subscription');
    }),
  'docs/samples/collections/collections.ts': () =>
    withServer('docs/samples/collections/collections.ts', async (client) => {
      const big = await client.call<string>('order', 'ann', 10);
      await client.call('order', 'ann', 5);
      assert.equal(await client.call('openTotal'), 15);
      await client.call('pay', big);
      assert.equal(await client.call('openTotal'), 5);
      assert.equal((await client.call<{ total: number }>('biggest', 'ann')).total, 10);
    }),
  'docs/samples/coming-from-meteor/app.ts': () =>
    withServer('docs/samples/coming-from-meteor/app.ts', async (client) => {
      await client.subscribe('links').ready;
      const id = await client.call<string>('links.insert', 'Perseid', 'http://127.0.0.1/');
      assert.equal(client.collection<{ title: string }>('links').findOne(id)?.title, 'Perseid');
      await assert.rejects(client.call('links.insert', 42, 'x'), { error: 400 });
    }),
  'docs/samples/client/client.ts': async () => {
    const t = await serve('docs/samples/getting-started/app.ts');
    try {
      const { run } = await sample<{ run(url: string): Promise<string[]> }>('docs/samples/client/client.ts');
      assert.deepEqual(await run(t.url), ['from the client']);
    } finally {
      await t.close();
    }
  },
  'docs/samples/client/contract.ts': async () => {
    const contract = await sample<{ addTask: { name: string }; setDone: { name: string }; tasksPublication: { kind: string } }>('docs/samples/client/contract.ts');
    assert.deepEqual([contract.addTask.name, contract.setDone.name, contract.tasksPublication.kind], ['tasks.add', 'tasks.setDone', 'publication']);
  },
  'docs/samples/client/server.ts': () =>
    withServer('docs/samples/client/server.ts', async (client) => {
      const id = await client.call<string>('tasks.add', '  trimmed  ');
      await client.subscribe('tasks').ready; // the limit's default applies
      assert.equal(client.collection<{ text: string }>('tasks').findOne(id)?.text, 'trimmed');
      await assert.rejects(client.call('tasks.add', ''), { error: 400, reason: 'Match failed' });
      await assert.rejects(client.call('tasks.setDone', id, 'yes'), { error: 400 });
    }),
  'docs/samples/client/page.ts': async () => {
    const t = await serve('docs/samples/client/server.ts');
    try {
      const { run } = await sample<{ run(url: string): Promise<{ shownAtOnce: boolean; open: string[]; events: string[] }> }>('docs/samples/client/page.ts');
      assert.deepEqual(await run(t.url), { shownAtOnce: true, open: ['test them'], events: ['added write the docs', 'added test them', 'removed'] });
    } finally {
      await t.close();
    }
  },
  'docs/samples/react/tasks.tsx': async () => {
    const t = await serve('docs/samples/client/server.ts');
    const client = new DDPClient(t.url);
    const { JSDOM } = await import('jsdom');
    const dom = new JSDOM('<!doctype html><body><div id="root"></div></body>');
    Object.assign(globalThis, { window: dom.window, document: dom.window.document });
    if (!('navigator' in globalThis)) Object.assign(globalThis, { navigator: dom.window.navigator });
    const { createRoot } = await import('react-dom/client');
    const { createElement } = await import('react');
    const { App } = await sample<{ App: (props: { client: DDPClient }) => unknown }>('docs/samples/react/tasks.tsx');
    const container = dom.window.document.getElementById('root')!;
    const root = createRoot(container);
    try {
      await client.call('tasks.add', 'from the server');
      root.render(createElement(App as never, { client }));
      await eventually(() => container.textContent?.includes('from the server') === true, 'the task rendered');
      (container.querySelector('button') as HTMLButtonElement).click();
      await eventually(() => container.querySelectorAll('li').length === 2, 'the added task rendered');
      (container.querySelector('li') as HTMLElement).click();
      await eventually(() => container.querySelector('li.done') !== null, 'the task marked done');
    } finally {
      root.unmount();
      client.disconnect();
      await t.close();
    }
  },
  'docs/samples/monitoring/stats.ts': async () => {
    const t = await serve('docs/samples/getting-started/app.ts');
    try {
      const { readFigures } = await sample<{ readFigures(url: string): Promise<{ status: string; sessions: number; counters: number }> }>('docs/samples/monitoring/stats.ts');
      const figures = await readFigures(t.url);
      assert.equal(figures.status, 'ok');
      assert.equal(figures.sessions, 0);
      assert.ok(figures.counters > 10, `${figures.counters} counters`);
    } finally {
      await t.close();
    }
  },
  'docs/samples/monitoring/apm.ts': () =>
    withServer('docs/samples/getting-started/app.ts', async (client, t) => {
      // Connected first: a sample the APM takes between reset and the handshake would see no session and take
      // this busy test process's CPU for an idle server's, above the capacity target (no plan).
      await client.call('addNote', 'connected');
      apm.reset(); // one APM per process: earlier samples' methods (a bcrypt login) would be the slowest
      for (let i = 0; i < 3; i++) await client.call('addNote', `apm ${i}`);
      const { readApm } = await sample<{ readApm(url: string): Promise<{ slowest?: string; advice: string[]; instances: number | null }> }>('docs/samples/monitoring/apm.ts');
      const figures = await readApm(t.url);
      const seen = JSON.stringify(figures);
      assert.equal(figures.slowest, 'addNote', seen);
      assert.ok(Array.isArray(figures.advice), seen);
      assert.equal(typeof figures.instances, 'number', `with a session open there is a plan: ${seen}`);
    }),
  'docs/samples/monitoring/tracing.ts': async () => {
    // A loopback OTLP receiver stands in for the collector; the sample's exporter reads its URL from the environment.
    const bodies: string[] = [];
    const receiver = createHttpServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString('latin1')));
      req.on('end', () => {
        bodies.push(`${req.url} ${body}`);
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`;
    const { provider } = await sample<{ provider: { forceFlush(): Promise<void>; shutdown(): Promise<void> } }>('docs/samples/monitoring/tracing.ts');
    try {
      await withServer('docs/samples/getting-started/app.ts', async (client) => {
        await client.call('addNote', 'traced');
      });
      await provider.forceFlush();
      const sent = bodies.join('\n');
      assert.match(sent, /^\/v1\/traces /m);
      assert.match(sent, /perseid\.method\/addNote/);
      assert.match(sent, /insert notes/);
    } finally {
      await provider.shutdown();
      otelTrace.disable();
      delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
      receiver.close();
    }
  },
  'docs/samples/jobs/signal.ts': async () => {
    // The partner: page 1 has two orders; page 2 does not answer the first attempt (which times out), then is empty.
    let hungClosedAt: number | undefined;
    let hung = false;
    const partner = createHttpServer((req, res) => {
      const page = new URL(req.url!, 'http://127.0.0.1').searchParams.get('page');
      if (page === '2' && !hung) {
        hung = true;
        res.on('close', () => (hungClosedAt = Date.now()));
        return;
      }
      res.setHeader('content-type', 'application/json').end(JSON.stringify(page === '1' ? [{ id: 1 }, { id: 2 }] : []));
    });
    await new Promise<void>((listening) => partner.listen(0, '127.0.0.1', listening));
    const t = await serve('docs/samples/jobs/signal.ts');
    try {
      await t.server.jobs.start({ pollMs: 50 });
      const id = await t.server.jobs.enqueue('import-orders', { url: `http://127.0.0.1:${(partner.address() as { port: number }).port}/orders` });
      await eventually(async () => (await t.server.jobs.run(id))?.status === 'succeeded', 'the retry to import the orders', 15_000);
      const run = (await t.server.jobs.run(id))!;
      assert.deepEqual([run.attempts, run.attemptLog[0]?.error, run.result], [2, 'timed out after 5000 ms', { rows: 2 }]);
      // Cancelled by the aborted signal when the attempt timed out, not left open beside the retry.
      assert.ok(hungClosedAt !== undefined && hungClosedAt <= new Date(run.attemptLog[1]!.startedAt).getTime() + 100, 'the timed-out request was left open');
    } finally {
      await t.server.jobs.stop();
      await t.close();
      partner.closeAllConnections();
      partner.close();
    }
  },
  'docs/samples/metrics/calls.ts': () =>
    withServer('docs/samples/getting-started/app.ts', async (client, t) => {
      const { callsPerMethod } = await sample<{ callsPerMethod(url: string): Promise<Record<string, number>> }>('docs/samples/metrics/calls.ts');
      const before = (await callsPerMethod(t.url)).addNote ?? 0;
      await client.call('addNote', 'one');
      await client.call('addNote', 'two');
      assert.equal((await callsPerMethod(t.url)).addNote, before + 2);
    }),
  'docs/samples/metrics/bytes.ts': () =>
    withServer('docs/samples/getting-started/app.ts', async (client, t) => {
      type Bytes = { publications: Record<string, { initial: number; live: number }>; compressionRatio: number | null };
      const { publicationBytes } = await sample<{ publicationBytes(url: string): Promise<Bytes> }>('docs/samples/metrics/bytes.ts');
      // The process's figures are shared with the other samples' runs: compared before and after.
      const at = async () => (await publicationBytes(t.url)).publications.latestNotes ?? { initial: 0, live: 0 };
      const start = await at();
      await client.call('addNote', 'before the subscription');
      await client.subscribe('latestNotes').ready;
      const ready = await at();
      assert.ok(ready.initial - start.initial > 'before the subscription'.length, JSON.stringify({ start, ready }));
      assert.equal(ready.live, start.live);
      await client.call('addNote', 'a live one');
      const { publications, compressionRatio } = await publicationBytes(t.url);
      assert.ok(publications.latestNotes!.live - ready.live > 'a live one'.length, JSON.stringify({ ready, now: publications.latestNotes }));
      assert.ok(compressionRatio === null || compressionRatio > 0);
    }),
  'docs/samples/load-testing/scenario.ts': async () => {
    const t = await serve('docs/samples/getting-started/app.ts');
    try {
      const report = await runScenario({ url: t.url, scenario: resolve('dist/docs/samples/load-testing/scenario.js'), concurrency: 2, duration: 1, thinkMs: 10 });
      assert.ok(report.users.completed >= 2, JSON.stringify(report.users));
      assert.deepEqual(report.errors, {});
      assert.ok((report.measures.addNote?.count ?? 0) >= 6, JSON.stringify(report.measures));
    } finally {
      await t.close();
    }
  },
  'docs/samples/accounts/notes.ts': async () => {
    const app = await sample<{ setup: Setup }>('docs/samples/accounts/notes.ts');
    const t = await startServer((server) => {
      app.setup(server);
      server.methods({
        dropMyConnection(this: { connection: { close(): void } }) {
          setTimeout(() => this.connection.close(), 10);
        },
      });
    });
    const client = new DDPClient(t.url, { backoff: { minTimeout: 50, maxTimeout: 200 } });
    const items = new Map<string, string>();
    const storage: TokenStorage = { getItem: (k) => items.get(k) ?? null, setItem: (k, v) => void items.set(k, v), removeItem: (k) => void items.delete(k) };
    const accounts = new AccountsClient(client, storage);
    try {
      await assert.rejects(client.call('addNote', 'anonymous'), { error: 401 });
      await assert.rejects(accounts.createUser({ username: 'al', password: 'pw' }), { error: 403, reason: 'User validation failed' });
      const userId = await accounts.createUser({ username: 'ada', password: 'correct horse' });
      assert.equal(accounts.userId(), userId);
      assert.ok(items.get('perseid.loginToken'));
      const notes = client.collection<{ text: string }>('notes');
      await client.subscribe('myNotes').ready;
      await client.call('addNote', 'hello');
      assert.deepEqual(notes.find().map((n) => n.text), ['hello']);
      await assert.rejects(client.call('addNote', { $ne: 1 }), { error: 400, reason: 'Match failed' });
      // Counted as they run, one after another: on a busy machine 6 could spread over two seconds' windows.
      const outcomes = await Promise.allSettled(Array.from({ length: 20 }, (_v, i) => client.call('addNote', `n${i}`)));
      assert.ok(outcomes.some((o) => o.status === 'rejected' && (o.reason as { error?: unknown }).error === 'too-many-requests'));
      // The server drops the connection: the client resumes with its token before resubscribing.
      const sessionBefore = client.sessionId;
      await client.call('dropMyConnection');
      await eventually(() => client.status === 'connected' && client.sessionId !== sessionBefore, 'the reconnect');
      assert.equal(accounts.userId(), userId);
      await eventually(() => notes.find().some((n) => n.text === 'hello'), "the user's notes after the resume");
      await accounts.logout();
      await eventually(() => notes.find().length === 0, 'the notes gone after logout');
      assert.equal(items.size, 0);
    } finally {
      client.disconnect();
      await t.close();
    }
  },
  'docs/samples/readme/app.js': () =>
    withServer('docs/samples/readme/app.js', async (client) => {
      await client.subscribe('room', 'lobby').ready;
      const id = await client.call<string>('send', 'lobby', 'hi');
      assert.equal(client.collection<{ text: string }>('messages').findOne(id)?.text, 'hi');
      await assert.rejects(client.call('send', 'lobby', ''), { error: 400, reason: 'Empty message' });
    }),
  'docs/samples/readme/page.js': async () => {
    if (!CHROMIUM) {
      console.log('# the README page sample needs Chromium (apt-get install chromium): only its file was compared');
      return;
    }
    const publicDir = mkdtempSync(join(tmpdir(), 'perseid-readme-page-'));
    cpSync('docs/samples/readme/page.js', join(publicDir, 'page.js'));
    writeFileSync(join(publicDir, 'index.html'), '<!doctype html><html><body><script type="module" src="/page.js"></script></body></html>');
    const app = await sample<{ default: Setup }>('docs/samples/readme/app.js');
    const t = await startServer(async (server) => {
      await app.default(server);
      server.serveStatic(publicDir);
    });
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
    try {
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(t.url);
      await page.waitForSelector('p >> text=hello', { timeout: 15000 });
      assert.deepEqual(errors, []);
    } finally {
      await browser.close();
      await t.close();
      rmSync(publicDir, { recursive: true, force: true });
    }
  },
};

/** The `perseid` command lines of the shell blocks: `npx perseid ...`, `npm create perseid ... -- ...`, `node dist/src/cli/main.js ...`. */
function commandLines(): Array<{ page: string; line: string; args: string[] }> {
  const out: Array<{ page: string; line: string; args: string[] }> = [];
  for (const block of blocks.filter((b) => b.lang === 'sh')) {
    for (const raw of block.text.split('\n')) {
      const line = raw.replace(/\s+#.*$/, '').trim();
      for (const part of line.split(/&&|;/).map((p) => p.trim())) {
        const words = [...part.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]!);
        while (words.length && /^[A-Z_]+=/.test(words[0]!)) words.shift();
        let args: string[] | undefined;
        if (words[0] === 'npx' && words[1] === 'perseid') args = words.slice(2);
        else if (words[0] === 'node' && words[1] === 'dist/src/cli/main.js') args = words.slice(2);
        else if (words[0] === 'npm' && words[1] === 'create' && words[2] === 'perseid') args = ['create', ...words.slice(3).filter((w) => w !== '--')];
        if (args) out.push({ page: `${block.page}:${block.line}`, line: part, args });
      }
    }
  }
  return out;
}

const SPECS: Record<string, CommandSpec> = {
  create: createCommand,
  dev: devCommand,
  start: startCommand,
  load: loadCommand,
  autoscale: autoscaleCommand,
  store: storeCommand,
  top: topCommand,
  advise: adviseCommand,
  capacity: capacityCommand,
};

describe('docs samples', () => {
  const work = mkdtempSync(join(tmpdir(), 'perseid-docs-'));
  after(() => rmSync(work, { recursive: true, force: true }));

  it('every TypeScript and JavaScript block names its sample file and is that file exactly', () => {
    const code = blocks.filter((b) => ['ts', 'js', 'typescript', 'javascript', 'tsx', 'jsx', 'mjs'].includes(b.lang));
    assert.ok(code.length >= 10, `${code.length} code blocks`);
    for (const block of code) {
      const where = `${block.page}:${block.line}`;
      assert.ok(block.sample, `${where}: a code block needs <!-- sample: docs/samples/<page>/<name>.ts --> above it`);
      assert.ok(existsSync(block.sample), `${where}: ${block.sample} does not exist`);
      assert.equal(block.text, readFileSync(block.sample, 'utf8'), `${where} differs from ${block.sample}`);
    }
  });

  it('every sample file is shown on a page and has a run', () => {
    const files = readdirSync('docs/samples', { recursive: true, encoding: 'utf8' })
      .filter((f) => /\.(ts|tsx|js)$/.test(f))
      .map((f) => relative(ROOT, join(ROOT, 'docs/samples', f)));
    const shown = new Set(blocks.map((b) => b.sample).filter(Boolean));
    assert.deepEqual(files.filter((f) => !shown.has(f)), [], 'sample files no page shows');
    assert.deepEqual(files.filter((f) => !RUNS[f]).sort(), [], 'sample files without a run in this test');
    assert.deepEqual(Object.keys(RUNS).filter((f) => !files.includes(f)), [], 'runs of samples that no longer exist');
  });

  for (const path of Object.keys(RUNS).sort()) {
    it(`runs ${path}`, async () => {
      await RUNS[path]!();
    });
  }

  it('every perseid command line in a shell block parses, and create runs', () => {
    const lines = commandLines();
    assert.ok(lines.length >= 10, `${lines.length} command lines found`);
    for (const { page, line, args } of lines) {
      const [name, ...rest] = args;
      const spec = SPECS[name!];
      assert.ok(spec, `${page}: unknown command in \`${line}\``);
      assert.doesNotThrow(() => parseCommand(spec, rest, {}), `${page}: \`${line}\``);
      if (name === 'create') {
        const [dir, ...flags] = rest.filter((word) => !/^(\.\/)?perseid-[\d.]+\.tgz$/.test(word));
        const made = spawnSync(process.execPath, [CLI, 'create', join(work, `${Date.now()}-${dir!.replace(/\W/g, '')}`), ...flags.filter((f, i, all) => f !== '--perseid' && all[i - 1] !== '--perseid')], { encoding: 'utf8' });
        assert.equal(made.status, 0, `${page}: \`${line}\`: ${made.stderr}`);
      }
    }
    for (const name of Object.keys(SPECS)) {
      const help = spawnSync(process.execPath, [CLI, name, '--help'], { encoding: 'utf8' });
      assert.equal(help.status, 0, `perseid ${name} --help`);
    }
  });

  it('the type check the docs give passes on the TypeScript app of getting-started, and fails on a type error', () => {
    const lines = blocks
      .filter((b) => b.lang === 'sh')
      .flatMap((b) => b.text.split('\n').map((raw) => ({ page: `${b.page}:${b.line}`, words: raw.replace(/\s+#.*$/, '').trim().split(/\s+/) })))
      .filter(({ words }) => words[0] === 'npx' && words[1] === 'tsc');
    assert.ok(lines.length >= 1, 'a shell block with the npx tsc line that checks an app\'s types');
    // An app as npm install leaves it: Perseid, typescript and @types/node in node_modules (linked from this checkout's).
    const app = mkdtempSync(join(work, 'typed-app-'));
    writeFileSync(join(app, 'package.json'), JSON.stringify({ type: 'module' }));
    mkdirSync(join(app, 'node_modules/@types'), { recursive: true });
    for (const name of ['typescript', '@types/node']) symlinkSync(join(ROOT, 'node_modules', name), join(app, 'node_modules', name));
    symlinkSync(ROOT, join(app, 'node_modules/perseid'));
    const source = readFileSync('docs/samples/getting-started/app.ts', 'utf8');
    for (const { page, words } of lines) {
      const tsc = (code: string) => {
        writeFileSync(join(app, 'app.ts'), code);
        return spawnSync(process.execPath, [join(app, 'node_modules/typescript/bin/tsc'), ...words.slice(2)], { cwd: app, encoding: 'utf8', timeout: 60000 });
      };
      const good = tsc(source);
      assert.equal(good.status, 0, `${page}: ${words.join(' ')}: ${good.stdout}${good.stderr}`);
      const bad = tsc(source.replace('at: new Date()', "at: 'today'"));
      assert.match(bad.stdout, /app\.ts\(\d+,\d+\): error TS2322/, `${page}: ${words.join(' ')}`);
    }
  });
});
