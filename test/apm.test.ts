/**
 * The APM against a real server and real DDP clients (simpleddp, and a raw
 * WebSocket peer for pipelined floods): Kadira's breakdown of a call (wait,
 * db, async, compute, and waitedOn charged to the call that held the queue),
 * OpenTelemetry spans received by the SDK's in-memory exporter with their
 * parent/child links (a subscription's wait for its live query too), the
 * index advisor on the embedded store (ESR order, prefix suppression, drop
 * advice, a created index making the advice disappear and the shape stop
 * scanning, and no advice the store would not use), access to the operational endpoints, and bounded cardinality
 * under 10,000 distinct method names and under filters of made-up field
 * names, and bounded errors under messages that carry a client's input.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { trace as otelTrace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import SimpleDDP from 'simpleddp';
import WebSocket from 'ws';
import { DDPError } from '../src/ddp/errors.js';
import { apm, NAME_CAP, type ApmSnapshot } from '../src/metrics/apm.js';
import type { IndexAdvice } from '../src/metrics/advisor.js';
import type { DashboardView } from '../src/metrics/dashboard-view.js';
import type { TraceRecord } from '../src/metrics/trace.js';
import { RawPeer, startServer, type TestServer } from './helpers.js';
import { eventually } from './processes.js';

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
provider.register();

function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

async function getJson<T>(url: string, headers: Record<string, string> = {}): Promise<T> {
  const res = await fetch(url, { headers });
  assert.equal(res.status, 200, `${url} answered ${res.status}: ${await res.clone().text()}`);
  return (await res.json()) as T;
}

function ddp(t: TestServer): SimpleDDP {
  return new SimpleDDP({ endpoint: t.wsUrl, SocketConstructor: WebSocket, reconnectInterval: 100 });
}

function slowest(snapshot: ApmSnapshot, name: string): TraceRecord {
  const found = snapshot.reports[0]!.traces.find((t) => t.kind === 'method' && t.name === name);
  assert.ok(found, `a trace of ${name}; have ${snapshot.reports[0]!.traces.map((t) => t.name).join(', ')}`);
  return found;
}

describe('APM on a real server', () => {
  let t: TestServer;
  let client: SimpleDDP;

  before(async () => {
    t = await startServer((server, { collection }) => {
      const items = collection<{ _id?: string; n: number }>('items');
      const orders = collection<{ owner: string; at: number; status: string }>('orders');
      const stock = collection<{ sku: string; owner: string }>('stock');
      server.methods({
        async hold() {
          await new Promise((r) => setTimeout(r, 100));
          return 'held';
        },
        async work() {
          await items.find({ n: { $gte: 0 } }).fetchAsync();
          busy(40);
          await new Promise((r) => setTimeout(r, 30));
          return 'done';
        },
        async traced() {
          const tracer = otelTrace.getTracer('app');
          await tracer.startActiveSpan('app-step', async (span) => {
            await items.findOneAsync({ n: 1 });
            span.end();
          });
          return items.find({ n: 2 }).countAsync();
        },
        async fails() {
          await items.findOneAsync({ n: 3 });
          throw new Error('kaput in fails');
        },
        refuses() {
          throw new DDPError(403, 'Access denied');
        },
        recent: (owner: unknown) => orders.find({ owner: owner as string }, { sort: { at: -1 }, limit: 10 }).fetchAsync(),
        byOwner: (owner: unknown) => orders.find({ owner: owner as string }).fetchAsync(),
        byOwnerStatus: (owner: unknown, status: unknown) => orders.find({ owner: owner as string, status: status as string }).fetchAsync(),
        bySku: (sku: unknown) => stock.find({ sku: sku as string }).fetchAsync(),
        stockByOwner: (owner: unknown) => stock.find({ owner: owner as string }, { sort: { sku: 1 }, limit: 5 }).fetchAsync(),
        since: (at: unknown) => orders.find({ at: { $gte: at as number } }).fetchAsync(),
        stall: () => busy(300),
      });
      server.publish('items', () => items.find({}));
      // A publication and a method of one name (as in the tasks example, `fetchTasks`).
      server.methods({ twin: () => 'method' });
      server.publish('twin', async function () {
        await new Promise((r) => setTimeout(r, 100));
        this.ready();
      });
      // Lets the connection's next message (an unsub) run while it waits.
      server.publish('unblocked', async function () {
        this.unblock();
        await new Promise((r) => setTimeout(r, 100));
        this.ready();
      });
    });
    const items = t.collection<{ n: number }>('items');
    for (let n = 0; n < 20; n++) await items.insertAsync({ n });
    client = ddp(t);
    await client.connect();
  });

  after(async () => {
    await client?.disconnect();
    await t?.close();
    await provider.shutdown();
  });

  it('breaks a call down into wait, db, async and compute, and charges waitedOn to the call that held the queue', async () => {
    // Sent back to back on one connection: `work` waits behind `hold` (100 ms on a timer).
    const [held, done] = await Promise.all([client.call('hold'), client.call('work')]);
    assert.equal(held, 'held');
    assert.equal(done, 'done');
    const snapshot = await getJson<ApmSnapshot>(`${t.url}/perseid/apm`);
    const work = slowest(snapshot, 'work');
    const hold = slowest(snapshot, 'hold');
    // Less than 100 ms when the second call reaches the server later than the first (a loaded machine).
    assert.ok(work.wait >= 50 && work.wait < 400, `work waited up to 100 ms in the queue: ${work.wait}`);
    assert.ok(work.compute >= 38 && work.compute < 200, `work computed ~40 ms: ${work.compute}`);
    // Whatever else this process runs while the timer waits (the client is in this process too) counts as the
    // loop being busy, i.e. compute: async is at most the timer, and compute and async together cover both.
    assert.ok(work.async > 0 && work.async < 200, `work awaited a 30 ms timer: ${work.async}`);
    assert.ok(work.async + work.compute >= 68, `compute and async cover the 40 ms loop and the 30 ms timer: ${work.async + work.compute}`);
    assert.ok(work.db > 0 && work.db < 200, `work read the database: ${work.db}`);
    const dbEvents = work.events.filter((e) => e.type === 'db');
    assert.equal(dbEvents.length, 1);
    assert.equal(dbEvents[0]!.collection, 'items');
    assert.equal(dbEvents[0]!.shape, '{n: range}');
    assert.equal(dbEvents[0]!.docs, 20);
    const parts = work.wait + work.db + work.async + work.compute;
    assert.ok(Math.abs(parts - work.total) < 1, `the parts add up to the total: ${parts} vs ${work.total}`);
    assert.ok(hold.async >= 90, `hold awaited its timer: ${hold.async}`);
    // Charged when hold ends, a moment before work starts.
    assert.ok(hold.waitedOn >= 45 && hold.waitedOn <= work.wait + 1, `hold is charged work's wait: ${hold.waitedOn} vs ${work.wait}`);
    assert.ok(work.waitedOn < 5, `nothing waited behind work: ${work.waitedOn}`);
    const workRow = snapshot.reports[0]!.methods.find((m) => m.name === 'work')!;
    assert.equal(workRow.calls, 1);
  });

  it('charges the time a subscription held the queue to no method of the same name', async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    try {
      peer.send({ msg: 'method', id: 'first', method: 'twin', params: [] });
      await peer.next((m) => m.msg === 'result' && m.id === 'first');
      const before = apm.methods.peek('twin')!.parts[4]!;
      // The subscription holds the connection's queue ~100 ms (its publish function waits); the call waits behind it.
      peer.send({ msg: 'sub', id: 'twin-sub', name: 'twin', params: [] });
      peer.send({ msg: 'method', id: 'behind', method: 'twin', params: [] });
      await peer.next((m) => m.msg === 'result' && m.id === 'behind');
      const behind = slowest(await getJson<ApmSnapshot>(`${t.url}/perseid/apm`), 'twin');
      assert.ok(behind.wait >= 50, `the call waited behind the subscription: ${behind.wait} ms`);
      assert.ok(apm.methods.peek('twin')!.parts[4]! - before < 5, `method twin held nothing back: ${apm.methods.peek('twin')!.parts[4]! - before} ms`);
    } finally {
      peer.ws.close();
    }
  });

  it('ends the span of a subscription stopped before it was ready', async () => {
    exporter.reset();
    const peer = await RawPeer.connected(t.wsUrl);
    try {
      peer.send({ msg: 'sub', id: 'given-up', name: 'unblocked', params: [] });
      peer.send({ msg: 'unsub', id: 'given-up' });
      await peer.next((m) => m.msg === 'nosub' && m.id === 'given-up');
      await eventually(() => exporter.getFinishedSpans().some((s) => s.name === 'perseid.subscription/unblocked'), 'the subscription\'s span to end');
      const span = exporter.getFinishedSpans().find((s) => s.name === 'perseid.subscription/unblocked')!;
      assert.equal(span.attributes['perseid.subscription.ready'], false);
    } finally {
      peer.ws.close();
    }
  });

  it('sends method and database spans to OpenTelemetry with their parent/child links', async () => {
    exporter.reset();
    assert.equal(await client.call('traced'), 1);
    const spans = exporter.getFinishedSpans();
    const method = spans.find((s) => s.name === 'perseid.method/traced');
    assert.ok(method, `a method span; got ${spans.map((s) => s.name).join(', ')}`);
    assert.equal(method.attributes['rpc.system'], 'ddp');
    assert.equal(method.attributes['rpc.method'], 'traced');
    assert.equal(method.kind, 1 /* SERVER */);
    const appStep = spans.find((s) => s.name === 'app-step')!;
    assert.equal(appStep.parentSpanContext?.spanId, method.spanContext().spanId, 'the app\'s span is a child of the method span');
    const dbSpans = spans.filter((s) => s.attributes['db.collection.name'] === 'items');
    assert.equal(dbSpans.length, 2, `two database spans; got ${spans.map((s) => s.name).join(', ')}`);
    const find = dbSpans.find((s) => s.attributes['db.operation.name'] === 'find')!;
    const count = dbSpans.find((s) => s.attributes['db.operation.name'] === 'count')!;
    assert.equal(find.parentSpanContext?.spanId, method.spanContext().spanId, 'the find is a child of the method span');
    assert.equal(count.parentSpanContext?.spanId, method.spanContext().spanId);
    assert.equal(find.attributes['db.query.summary'], '{n: eq}');
    assert.equal(find.attributes['db.system.name'], 'perseid-embedded');
    assert.equal(find.kind, 2 /* CLIENT */);
    for (const s of [find, count, appStep]) assert.equal(s.spanContext().traceId, method.spanContext().traceId);
  });

  it('keeps recent distinct errors with stack, count and where, and a failed call\'s span says so', async () => {
    exporter.reset();
    for (let i = 0; i < 3; i++) await assert.rejects(client.call('fails'));
    const snapshot = await getJson<ApmSnapshot>(`${t.url}/perseid/apm`);
    const error = snapshot.reports[0]!.errors.find((e) => e.name === 'fails');
    assert.ok(error, 'the error is listed');
    assert.equal(error.kind, 'method');
    assert.equal(error.count, 3);
    assert.equal(error.message, 'kaput in fails');
    assert.match(error.stack ?? '', /kaput in fails\n\s+at /);
    assert.equal(error.trace?.events.at(-1)?.type, 'error');
    assert.equal(snapshot.reports[0]!.methods.find((m) => m.name === 'fails')?.errors, 3);
    const span = exporter.getFinishedSpans().find((s) => s.name === 'perseid.method/fails')!;
    assert.equal(span.status.code, 2 /* ERROR */);
    // A refusal (a Meteor.Error of a 4xx code) is the client's: its span keeps the exception, not an error status.
    await assert.rejects(client.call('refuses'));
    const refused = exporter.getFinishedSpans().find((s) => s.name === 'perseid.method/refuses')!;
    assert.equal(refused.status.code, 0 /* UNSET */);
    assert.equal(refused.attributes['error.type'], undefined);
    assert.match(String(refused.events.find((e) => e.name === 'exception')?.attributes?.['exception.message']), /Access denied/);
  });

  it('counts subscriptions: ready time, initial documents and observer reuse', async () => {
    const other = ddp(t);
    await other.connect();
    try {
      exporter.reset();
      const first = client.subscribe('items');
      await first.ready();
      const second = other.subscribe('items');
      await second.ready();
      // Each subscription's span has its wait for the live query as a child: the first started it, the second joined it.
      const spans = exporter.getFinishedSpans();
      const subSpans = spans.filter((s) => s.name === 'perseid.subscription/items');
      assert.equal(subSpans.length, 2, `two subscription spans; got ${spans.map((s) => s.name).join(', ')}`);
      const observes = subSpans.map((sub) => spans.find((s) => s.name === 'perseid.observe items' && s.parentSpanContext?.spanId === sub.spanContext().spanId));
      assert.ok(observes.every(Boolean), `a perseid.observe child of each; got ${spans.map((s) => s.name).join(', ')}`);
      assert.deepEqual(observes.map((s) => [s!.attributes['perseid.live_query.reused'], s!.attributes['db.response.returned_rows']]), [[false, 20], [true, 20]]);
      const snapshot = await getJson<ApmSnapshot>(`${t.url}/perseid/apm`);
      const pub = snapshot.reports[0]!.publications.find((p) => p.name === 'items')!;
      assert.equal(pub.subs, 2);
      assert.equal(pub.active, 2);
      assert.equal(pub.ready.count, 2);
      assert.equal(pub.initialDocs, 40);
      assert.equal(pub.observersCreated, 1);
      assert.equal(pub.observersReused, 1);
      // A change reaches both subscribers: counted once per change, with its two subscribers.
      const id = await t.collection<{ n: number }>('items').insertAsync({ n: 100 });
      await t.collection('items').removeAsync({ _id: id });
      let live: { added: number; removed: number } | undefined;
      await eventually(() => {
        live = apm.report().publications.find((p) => p.name === 'items')?.live;
        return live?.added === 2 && live.removed === 2;
      }, `the live changes counted: ${JSON.stringify(live)}`);
      const subTrace = snapshot.reports[0]!.traces.find((tr) => tr.kind === 'sub' && tr.name === 'items')!;
      assert.ok(subTrace.events.some((e) => e.type === 'db' && e.collection === 'items'), 'the live query\'s first read is in the sub\'s trace');
      await first.stop();
      await second.stop();
    } finally {
      await other.disconnect();
    }
  });

  it('advises one index per scanning shape in ESR order, with prefix suppression and the exact line; creating it removes the advice', async () => {
    // Seeded here, after the timing tests: the store's work on 9,000 writes would run in their awaits.
    const ordersCollection = t.collection<{ owner: string; at: number; status: string }>('orders');
    for (let i = 0; i < 3000; i++) await ordersCollection.insertAsync({ owner: `o${i % 30}`, at: i, status: i % 3 === 0 ? 'open' : 'done' });
    const stock = t.collection<{ sku: string; owner: string }>('stock');
    await stock.createIndexAsync({ sku: 1 });
    await stock.createIndexAsync({ owner: 1 });
    for (let i = 0; i < 6000; i++) await stock.insertAsync({ sku: `s${i}`, owner: `o${i % 20}` });
    for (let i = 0; i < 5; i++) {
      await client.call('recent', `o${i}`);
      await client.call('byOwner', `o${i}`);
      await client.call('bySku', `s${i}`);
    }
    let advice = await getJson<IndexAdvice[]>(`${t.url}/perseid/advice`);
    const orders = advice.filter((a) => a.collection === 'orders');
    assert.equal(orders.length, 1, `one index for orders (the {owner: 1} one is a prefix of it): ${JSON.stringify(orders)}`);
    assert.equal(orders[0]!.action, 'create');
    assert.deepEqual(orders[0]!.index, { owner: 1, at: -1 });
    assert.equal(orders[0]!.line, "await new Collection('orders').createIndexAsync({ owner: 1, at: -1 });");
    assert.deepEqual(orders[0]!.shapes.sort(), ['{owner: eq}', '{owner: eq} sort {at: -1}']);
    assert.ok(orders[0]!.cost!.examinedPerReturned! > 10, `measured: ${JSON.stringify(orders[0]!.cost)}`);
    assert.equal(orders[0]!.cost!.inferred, false);
    assert.ok(!advice.some((a) => a.collection === 'stock' && a.action === 'create'), 'the indexed {sku: eq} shape gets no advice');

    await t.collection('orders').createIndexAsync({ owner: 1, at: -1 });
    advice = await getJson<IndexAdvice[]>(`${t.url}/perseid/advice`);
    assert.ok(!advice.some((a) => a.collection === 'orders'), `no advice left for orders: ${JSON.stringify(advice)}`);
    await client.call('recent', 'o7');
    const snapshot = await getJson<ApmSnapshot>(`${t.url}/perseid/apm`);
    const shape = snapshot.reports[0]!.database.shapes.find((s) => s.collection === 'orders' && s.shape.key === '{owner: eq} sort {at: -1}')!;
    assert.equal(shape.plan?.stage, 'IXSCAN', 'the shape stopped scanning');
    assert.equal(shape.plan?.index, 'owner_1_at_-1');
    assert.equal(shape.plan?.examined, 100);
  });

  it('advises no index the embedded store would not use, and dropping an index a longer one starts with', async () => {
    // stock has {owner: 1}; {owner: eq} sorted by sku, limit 5, still reads 300 documents per 5 returned, and
    // would with {owner: 1, sku: 1} too: the store looks the owner's documents up and sorts them.
    for (let i = 0; i < 5; i++) await client.call('stockByOwner', `o${i}`);
    // A range alone: the store uses no index for it (3000 read per 10 returned, with or without {at: 1}).
    for (let i = 0; i < 5; i++) assert.equal(((await client.call('since', 2990)) as unknown[]).length, 10);
    let advice = await getJson<IndexAdvice[]>(`${t.url}/perseid/advice`);
    assert.deepEqual(advice.filter((a) => a.action === 'create'), [], 'nothing to create that the store would use');
    await t.collection('stock').createIndexAsync({ owner: 1, sku: 1 });
    advice = await getJson<IndexAdvice[]>(`${t.url}/perseid/advice`);
    const drop = advice.find((a) => a.collection === 'stock' && a.action === 'drop');
    assert.equal(drop?.name, 'owner_1');
    assert.equal(drop?.line, "await new Collection('stock').dropIndexAsync('owner_1');");
    assert.deepEqual(drop?.coveredBy, { owner: 1, sku: 1 });
  });

  it('shows an event loop blocked 300 ms now and then as its longest delay, which the p99 of hundreds of delays hides', async () => {
    // Three stalls a second apart: each 2 s sample holds one among some two hundred 10 ms ticks.
    for (let i = 0; i < 3; i++) {
      await client.call('stall');
      await new Promise((r) => setTimeout(r, 1000));
    }
    let view: DashboardView | undefined;
    await eventually(async () => {
      view = await getJson<DashboardView>(`${t.url}/perseid/dashboard.json`);
      return view.history.filter((p) => p.lagMax >= 250).length >= 2;
    }, 'the samples of the stalls', 8000);
    assert.ok(view!.processes[0]!.lagMax >= 250 && view!.processes[0]!.lagMax < 400, `the process row's longest delay of the last minute: ${view!.processes[0]!.lagMax} ms`);
  });

  it('serves the Prometheus text with conventional names, units and the calls made', async () => {
    const res = await fetch(`${t.url}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    assert.match(text, /^# TYPE perseid_method_duration_seconds histogram$/m);
    assert.match(text, /^perseid_method_duration_seconds_count\{method="work"\} 1$/m);
    assert.match(text, /^perseid_method_duration_seconds_bucket\{method="work",le="\+Inf"\} 1$/m);
    assert.match(text, /^perseid_method_errors_total\{method="fails"\} 3$/m);
    assert.match(text, /^perseid_method_breakdown_seconds_total\{method="work",part="compute"\} 0\.0[4-9]/m);
    assert.match(text, /^perseid_publication_subscriptions_total\{publication="items"\} 2$/m);
    assert.match(text, /^perseid_db_documents_examined_total\{collection="orders",shape="\{owner: eq\} sort \{at: -1\}"\} \d+/m);
    assert.match(text, /^perseid_process_resident_memory_bytes \d+$/m);
    assert.match(text, /^perseid_event_loop_delay_seconds_count \d+$/m);
    assert.doesNotMatch(text, /o7|s3"/, 'no argument value becomes a label');
  });
});

describe('who may read the operational endpoints', () => {
  const paths = ['/metrics', '/perseid/apm', '/perseid/dashboard.json', '/perseid/advice', '/perseid/capacity', '/perseid/stats'];

  it('refuses a non-loopback client (a forwarded public address) without the token: 403', async () => {
    const t = await startServer(() => undefined, { httpForwardedCount: 1 });
    try {
      for (const path of [...paths, '/perseid/dashboard']) {
        const res = await fetch(t.url + path, { headers: { 'x-forwarded-for': '203.0.113.7' } });
        assert.equal(res.status, 403, path);
        assert.doesNotMatch(await res.text(), /perseid_|"reports"/);
      }
      const local = await fetch(`${t.url}/metrics`, { headers: { 'x-forwarded-for': '127.0.0.1' } });
      assert.equal(local.status, 200);
    } finally {
      await t.close();
    }
  });

  it('with an admin token, refuses every request without it, loopback included: 401', async () => {
    const t = await startServer(() => undefined, { adminToken: 'tok-123456' });
    try {
      for (const path of paths) {
        const res = await fetch(t.url + path);
        assert.equal(res.status, 401, path);
        assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="perseid"');
        const wrong = await fetch(t.url + path, { headers: { authorization: 'Bearer nope' } });
        assert.equal(wrong.status, 401, path);
        const right = await fetch(t.url + path, { headers: { authorization: 'Bearer tok-123456' } });
        assert.equal(right.status, 200, path);
      }
      // The page carries no figures: refused, it still brings its token form.
      const page = await fetch(`${t.url}/perseid/dashboard`);
      assert.equal(page.status, 401);
      assert.match(await page.text(), /<form id="login"/);
    } finally {
      await t.close();
    }
  });

  it('answers 400 with one line for a bad capacity target', async () => {
    const t = await startServer(() => undefined);
    try {
      const res = await fetch(`${t.url}/perseid/capacity?sessions=-3`);
      assert.equal(res.status, 400);
      assert.equal(await res.text(), 'sessions must be a positive whole number\n');
      const plan = await getJson<{ plan: { sessions: number } }>(`${t.url}/perseid/capacity?sessions=5000&cpu=60`);
      assert.equal(plan.plan.sessions, 5000);
    } finally {
      await t.close();
    }
  });
});

describe('bounded cardinality', () => {
  it('10,000 distinct method names keep at most the cap of entries and series', async () => {
    const names = Array.from({ length: 10000 }, (_, i) => `m${i}`);
    const t = await startServer((server) => server.methods(Object.fromEntries(names.map((name) => [name, () => 1]))));
    const peer = await RawPeer.connected(t.wsUrl);
    try {
      const sizeBefore = apm.methods.size;
      for (const [i, name] of names.entries()) peer.send({ msg: 'method', id: String(i), method: name, params: [] });
      await peer.next((m) => m.msg === 'result' && m.id === '9999', 60000);
      assert.ok(apm.methods.size <= NAME_CAP + 1, `at most ${NAME_CAP} names and (other): ${apm.methods.size}`);
      assert.ok(apm.methods.size - sizeBefore <= NAME_CAP + 1);
      assert.ok(apm.methods.overflowed >= 10000 - NAME_CAP, `the rest counted under (other): ${apm.methods.overflowed}`);
      const other = apm.methods.peek('(other)') ?? apm.methods.values().find((m) => m.name === '(other)');
      assert.ok(other && other.calls >= 10000 - NAME_CAP);
      const text = await (await fetch(`${t.url}/metrics`)).text();
      const series = text.split('\n').filter((line) => line.startsWith('perseid_method_duration_seconds_count{')).length;
      assert.ok(series <= NAME_CAP + 1, `series: ${series}`);
      const traces = (await getJson<ApmSnapshot>(`${t.url}/perseid/apm`)).reports[0]!.traces.length;
      assert.ok(traces <= 50, `the slowest traces are a bounded list: ${traces}`);
    } finally {
      peer.ws.close();
      await t.close();
    }
  });

  it('keeps an error message that carries a client\'s input cut short, in the errors, traces and stacks', async () => {
    const t = await startServer((server) => {
      server.methods({
        signup(email: unknown) {
          throw new DDPError(400, `Invalid email: ${String(email)}`);
        },
      });
    });
    const peer = await RawPeer.connected(t.wsUrl);
    try {
      for (let i = 0; i < 20; i++) peer.send({ msg: 'method', id: String(i), method: 'signup', params: [`${i}${'x'.repeat(100000)}`] });
      const reply = await peer.next((m) => m.msg === 'result' && m.id === '19', 20000);
      // The client gets its error as the app wrote it; only what the APM keeps is cut.
      assert.ok(JSON.stringify(reply).length > 100000);
      const apmText = await (await fetch(`${t.url}/perseid/apm`)).text();
      const dashboardText = await (await fetch(`${t.url}/perseid/dashboard.json`)).text();
      assert.ok(apmText.length < 1000000 && dashboardText.length < 1000000, `/perseid/apm: ${apmText.length} characters, dashboard.json: ${dashboardText.length}`);
      const report = (JSON.parse(apmText) as ApmSnapshot).reports[0]!;
      // By message: the test before filled the cap of method names, so signup may count under (other).
      const errors = report.errors.filter((e) => e.message.startsWith('Invalid email: '));
      assert.equal(errors.length, 20, 'each distinct message is still its own entry');
      for (const e of errors) {
        assert.match(e.message, /^Invalid email: \d+x+…$/);
        assert.ok(e.message.length <= 501 && e.stack!.length <= 4001, `message ${e.message.length}, stack ${e.stack!.length} characters`);
        assert.ok(e.stack!.includes(e.message), 'the stack begins with the cut message');
        assert.ok(e.trace!.error!.length <= 501 && e.trace!.events.every((ev) => (ev.message ?? '').length <= 501));
      }
    } finally {
      peer.ws.close();
      await t.close();
    }
  });

  it('a client\'s made-up field names in a filter the app passes on make one short query shape, not a label per name', async () => {
    const t = await startServer((server, { collection }) => {
      const listings = collection<{ city: string }>('listings');
      server.methods({ search: (filter: unknown) => listings.find(filter as Record<string, unknown>).fetchAsync() });
    });
    const peer = await RawPeer.connected(t.wsUrl);
    try {
      for (let i = 0; i < 30; i++) {
        const filter = Object.fromEntries(Array.from({ length: 300 }, (_, j) => [`f${i}_${j}_`.padEnd(100, 'x'), 1]));
        peer.send({ msg: 'method', id: String(i), method: 'search', params: [filter] });
      }
      peer.send({ msg: 'method', id: 'city', method: 'search', params: [{ city: 'Oslo' }] });
      await peer.next((m) => m.msg === 'result' && m.id === 'city', 20000);
      const text = await (await fetch(`${t.url}/metrics`)).text();
      const shapes = new Set([...text.matchAll(/^perseid_db_query_shape_operations_total\{.*collection="listings",shape="(.*)"\}/gm)].map((m) => m[1]));
      assert.deepEqual([...shapes].sort(), ['{(fields too many or too long to name: over 1000 characters)}', '{city: eq}'], 'one shape for every over-long filter, beside the ordinary one');
      const longest = Math.max(...text.split('\n').map((line) => line.length));
      assert.ok(longest < 2000, `the longest /metrics line: ${longest} characters`);
    } finally {
      peer.ws.close();
      await t.close();
    }
  });
});
