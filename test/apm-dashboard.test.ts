/**
 * `/perseid/dashboard` in a real headless Chromium while real DDP clients
 * (simpleddp) load the server: every chart has data, every table the load
 * should fill is filled (methods, publications, traces with breakdown bars,
 * errors, index advice, capacity, jobs), a timeline or stack a person opened
 * stays open through the redraws, and the page logs no error. A
 * screenshot is kept in test-artifacts/ (ignored by git). Needs Chromium,
 * like browser.test.ts; without it the suite is skipped and says so.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { chromium, type Browser, type Page } from 'playwright-core';
import SimpleDDP from 'simpleddp';
import WebSocket from 'ws';
import { startServer, type TestServer } from './helpers.js';
import { needs } from './skips.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
const skip = CHROMIUM ? false : needs('Chromium', 'apt-get install chromium (or set CHROMIUM_PATH)');

const CHARTS = ['c-throughput', 'c-latency', 'c-ready', 'c-cpu', 'c-memory', 'c-loop'];

describe('the APM dashboard in headless Chromium under load', { skip }, () => {
  let t: TestServer;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];
  const clients: SimpleDDP[] = [];
  let loading = true;
  let load: Promise<unknown> | undefined;
  let endLoad!: () => void;
  // simpleddp leaves a call pending when it disconnects: the load loops stop waiting when the test ends.
  const loadEnded = new Promise<void>((resolve) => (endLoad = resolve));
  const orEnd = <T>(work: Promise<T>) => Promise.race([work, loadEnded]);

  before(async () => {
    t = await startServer(async (server, { collection, database }) => {
      const notes = collection<{ owner: string; at: number; text: string }>('notes');
      server.methods({
        async addNote(owner: unknown) {
          return notes.insertAsync({ owner: String(owner), at: Date.now(), text: 'x'.repeat(50) });
        },
        latest: (owner: unknown) => notes.find({ owner: String(owner) }, { sort: { at: -1 }, limit: 5 }).fetchAsync(),
        broken() {
          throw new Error('broken on purpose');
        },
      });
      server.publish('notes', (owner: unknown) => notes.find({ owner: String(owner) }));
      server.jobs.define('digest', async () => {
        await notes.find({}).countAsync();
      });
      await server.jobs.start({ database, pollMs: 200 });
    });
    const notes = t.collection<{ owner: string; at: number; text: string }>('notes');
    for (let i = 0; i < 1500; i++) await notes.insertAsync({ owner: `u${i % 10}`, at: i, text: 'seed' });
    for (let i = 0; i < 3; i++) await t.server.jobs.enqueue('digest');
    for (let i = 0; i < 4; i++) {
      const client = new SimpleDDP({ endpoint: t.wsUrl, SocketConstructor: WebSocket, reconnectInterval: 100 });
      clients.push(client);
      await client.connect();
    }
    // Load until the test ends: calls, subscriptions and an error now and then.
    load = Promise.all(
      clients.map(async (client, i) => {
        let n = 0;
        while (loading) {
          const owner = `u${(i + n) % 10}`;
          await orEnd(client.call('addNote', owner));
          await orEnd(client.call('latest', owner));
          if (n % 10 === 0) await orEnd(client.call('broken').catch(() => undefined));
          if (n % 5 === 0) {
            // simpleddp hands back its old (stopped) subscription for the same name and parameters: n makes each one new.
            const sub = client.subscribe('notes', owner, n);
            await orEnd(sub.ready());
            await orEnd(sub.stop());
          }
          n++;
          await new Promise((r) => setTimeout(r, 20));
        }
      }),
    );
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    page = await browser.newPage({ viewport: { width: 1500, height: 1000 } });
    page.on('pageerror', (error) => pageErrors.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error') pageErrors.push(message.text());
    });
  });

  after(async () => {
    loading = false;
    endLoad();
    await load?.catch(() => undefined);
    await Promise.all(clients.map((c) => c.disconnect().catch(() => undefined)));
    await browser?.close();
    await t?.server.jobs.stop();
    await t?.close();
  });

  it('shows live charts and tables with data, and no console errors', async () => {
    await page.goto(`${t.url}/perseid/dashboard`);
    // The server samples every 2 s: charts have data once it has sampled twice under load.
    await page.waitForFunction(
      (ids) => {
        const charts = (window as unknown as { perseidCharts: Record<string, { data: number[][] }> }).perseidCharts;
        return ids.every((id) => charts[id] && charts[id].data[0]!.length >= 3);
      },
      CHARTS,
      { timeout: 30000 },
    );
    const chartData = await page.evaluate((ids) => {
      const charts = (window as unknown as { perseidCharts: Record<string, { data: number[][] }> }).perseidCharts;
      return Object.fromEntries(ids.map((id) => [id, charts[id]!.data.slice(1).map((series) => series.some((v) => v > 0))]));
    }, CHARTS);
    for (const id of CHARTS) assert.ok(chartData[id]!.some(Boolean), `${id} has non-zero data: ${JSON.stringify(chartData[id])}`);
    assert.ok(chartData['c-throughput']![0], 'methods per second is non-zero');
    assert.ok(chartData['c-latency']![1], 'method p95 is non-zero');
    const lastRate = await page.evaluate(() => (window as unknown as { perseidCharts: Record<string, { data: number[][] }> }).perseidCharts['c-throughput']!.data[1]!.at(-1));
    assert.ok(lastRate! > 0, `the load is still on at the last point: ${lastRate}`);

    await page.waitForFunction(() => document.querySelectorAll('#t-traces .bar span').length > 0 && document.querySelector('#t-jobs table') !== null, undefined, { timeout: 20000 });
    const text = async (id: string) => (await page.textContent(`#${id}`)) ?? '';
    assert.match(await text('t-methods'), /addNote/);
    assert.match(await text('t-methods'), /latest/);
    assert.match(await text('t-pubs'), /notes/);
    assert.match(await text('t-errors'), /broken on purpose/);
    assert.match(await text('t-advice'), /await new Collection\('notes'\)\.createIndexAsync\(\{ owner: 1, at: -1 \}\);/);
    assert.match(await text('t-capacity'), /\d/);
    assert.match(await text('t-jobs'), /digest/);
    assert.match(await text('t-shapes'), /\{owner: eq\} sort \{at: -1\}/);
    assert.match(await text('t-processes'), new RegExp(String(process.pid)));
    // Publications' bytes, live queries by change source, and the traffic (new sessions by transport, in and out).
    const pubRow = await page.$$eval('#t-pubs tr', (rows) => rows.map((r) => [...r.querySelectorAll('th,td')].map((c) => c.textContent ?? '')));
    const initialKb = pubRow[0]!.indexOf('initial KB');
    assert.ok(initialKb > 0, `an initial KB column: ${JSON.stringify(pubRow[0])}`);
    assert.ok(Number(pubRow.find((r) => r[0] === 'notes')![initialKb]) > 0, `notes sent some initial bytes: ${JSON.stringify(pubRow)}`);
    assert.match(await text('t-live'), /by change source.*embedded \d+/);
    const opened = /websocket (\d+)/.exec(await text('t-traffic'));
    assert.ok(opened && Number(opened[1]) >= clients.length, `new websocket sessions counted: ${await text('t-traffic')}`);
    assert.match(await text('t-servers'), /not a cluster balancer/);
    mkdirSync('test-artifacts', { recursive: true });
    await page.screenshot({ path: 'test-artifacts/apm-dashboard.png', fullPage: true });
    assert.deepEqual(pageErrors, []);
  });

  it('keeps a trace\'s timeline and an error\'s stack open through the redraws', async () => {
    await page.waitForSelector('#t-errors details summary');
    await page.click('#t-traces details summary');
    await page.click('#t-errors details summary');
    const opened = await page.$$eval('details[open]', (list) => list.map((d) => (d as HTMLElement).dataset.key!));
    assert.equal(opened.length, 2, `both opened: ${JSON.stringify(opened)}`);
    for (let i = 0; i < 2; i++) await page.waitForResponse((res) => res.url().includes('/perseid/dashboard.json'), { timeout: 10000 });
    // Redrawn: let the page put the new tables in.
    await page.waitForTimeout(200);
    const after = await page.$$eval('details', (list) => list.map((d) => ({ key: (d as HTMLElement).dataset.key!, open: (d as HTMLDetailsElement).open })));
    // The error's entry stays (same message); the trace stays unless a slower call of its name took its place.
    const error = after.find((d) => d.key === opened[1]);
    assert.ok(error?.open, `the error's stack is still open: ${JSON.stringify(after.filter((d) => d.open))}`);
    const trace = after.find((d) => d.key === opened[0]);
    assert.ok(!trace || trace.open, 'the trace\'s timeline is still open');
    assert.deepEqual(pageErrors, []);
  });
});
