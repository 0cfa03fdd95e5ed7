/**
 * The APM's byte and source figures against a real server, real clients and
 * a real scrape of `/metrics` (exact lines): bytes sent per publication,
 * initially and live by kind, equal to what the clients received; new
 * sessions by transport (raw WebSocket, SockJS over WebSocket, SockJS
 * polling from sockjs-client); bytes before and after permessage-deflate;
 * SockJS polling output in the bytes sent; live queries by change source; and
 * a publish function's own reads in its subscription's db time.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import type { ApmSnapshot } from '../src/metrics/apm.js';
import { RawPeer, seriesValue, startServer, type TestServer } from './helpers.js';
import { SockjsPeer } from './processes.js';

/** A raw DDP client that keeps the text of every message it receives, as sent. */
class TextPeer {
  readonly texts: string[] = [];
  private waiters: Array<() => void> = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      this.texts.push(data.toString());
      for (const wake of this.waiters.splice(0)) wake();
    });
  }

  static async connected(url: string, deflate = false): Promise<TextPeer> {
    const ws = new WebSocket(url, { perMessageDeflate: deflate });
    const peer = new TextPeer(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    peer.send({ msg: 'connect', version: '1', support: ['1'] });
    await peer.until((m) => m.msg === 'connected');
    return peer;
  }

  send(message: unknown): void {
    this.ws.send(JSON.stringify(message));
  }

  /** Waits (up to 5 s) for a message matching `match`; returns every text received up to it since `from`. */
  async until(match: (m: Record<string, unknown>) => boolean, from = 0): Promise<string[]> {
    const deadline = Date.now() + 5000;
    for (;;) {
      const i = this.texts.findIndex((t, n) => n >= from && match(JSON.parse(t) as Record<string, unknown>));
      if (i >= 0) return this.texts.slice(from, i + 1);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out; got ${this.texts.slice(-3).join(' ')}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.ws.once('close', () => resolve());
      this.ws.close();
    });
  }
}

const bytes = (texts: readonly string[]) => texts.reduce((n, t) => n + Buffer.byteLength(t), 0);
const kindOf = (text: string) => (JSON.parse(text) as { msg: string }).msg;

async function scrape(t: TestServer): Promise<string> {
  const res = await fetch(`${t.url}/metrics`);
  assert.equal(res.status, 200);
  return res.text();
}

/** The value of a series, 0 when absent. */
const value = (text: string, series: string) => seriesValue(text, series) ?? 0;

describe('APM figures: bytes, transports, compression, sources', () => {
  let t: TestServer;
  /** The byHand publication's subscription, which the test drives. */
  let byHand: { changed(collection: string, id: string, fields: Record<string, unknown>): void; removed(collection: string, id: string): void } | undefined;

  before(async () => {
    t = await startServer((server, { collection }) => {
      const notes = collection<{ text: string; n: number }>('notes');
      const blobs = collection<{ body: string }>('blobs');
      const items = collection<{ _id?: string; n: number }>('items');
      server.publish('notes', () => notes.find({}));
      server.publish('blobs', () => blobs.find({}));
      server.publish('bigItems', async () => {
        // The publish function's own read, before it returns its cursor.
        const found = await items.find({ n: { $gte: 5 } }).fetchAsync();
        return items.find({ _id: { $in: found.map((d) => d._id) } });
      });
      server.publish('itemsAbove', (n: unknown) => items.find({ n: { $gt: n as number } }));
      server.publish('byHand', function () {
        this.added('hand', 'h1', { label: 'first' });
        this.added('hand', 'h2', { label: 'second' });
        this.ready();
        byHand = { changed: this.changed.bind(this), removed: this.removed.bind(this) };
      });
      // No DDP pings: the byte checks compare what the server counted with what one client received.
    }, { heartbeatInterval: 10 * 60 * 1000 });
    const notes = t.collection<{ text: string; n: number }>('notes');
    for (let n = 0; n < 3; n++) await notes.insertAsync({ _id: `note${n}`, text: `note é ${n}`, n } as never);
    await t.collection<{ body: string }>('blobs').insertAsync({ body: 'perseid '.repeat(3000) });
    const items = t.collection<{ n: number }>('items');
    for (let n = 0; n < 10; n++) await items.insertAsync({ n });
  });

  after(async () => {
    await t?.close();
  });

  it('counts the bytes each publication sends, initially and live by kind, over every subscriber', async () => {
    const peers = [await TextPeer.connected(t.wsUrl), await TextPeer.connected(t.wsUrl)];
    const initial: string[] = [];
    for (const [i, peer] of peers.entries()) {
      peer.send({ msg: 'sub', id: `s${i}`, name: 'notes', params: [] });
      const got = await peer.until((m) => m.msg === 'ready');
      initial.push(...got.filter((text) => kindOf(text) === 'added'));
    }
    assert.equal(initial.length, 6);
    const marks = peers.map((p) => p.texts.length);
    const notes = t.collection<{ text: string; n: number }>('notes');
    await notes.insertAsync({ _id: 'note9', text: 'a new note', n: 9 } as never);
    await notes.updateAsync('note0', { $set: { text: 'edited ünïcode' } });
    await notes.removeAsync('note1');
    const live: string[] = [];
    for (const [i, peer] of peers.entries()) live.push(...(await peer.until((m) => m.msg === 'removed', marks[i])));
    const text = await scrape(t);
    assert.equal(value(text, 'perseid_publication_initial_bytes_total{publication="notes"}'), bytes(initial));
    assert.equal(value(text, 'perseid_publication_initial_documents_total{publication="notes"}'), 6);
    for (const kind of ['added', 'changed', 'removed']) {
      const sent = live.filter((l) => kindOf(l) === kind);
      assert.equal(sent.length, 2, `${kind} reached both subscribers`);
      assert.equal(value(text, `perseid_publication_live_bytes_total{publication="notes",kind="${kind}"}`), bytes(sent), kind);
    }
    await Promise.all(peers.map((p) => p.close()));
  });

  it('counts the documents and bytes a publication sends by hand (this.added, changed, removed)', async () => {
    const peer = await TextPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 'h', name: 'byHand', params: [] });
    const initial = (await peer.until((m) => m.msg === 'ready')).filter((text) => kindOf(text) === 'added');
    assert.equal(initial.length, 2);
    const mark = peer.texts.length;
    byHand!.changed('hand', 'h1', { label: 'edited' });
    byHand!.removed('hand', 'h2');
    const live = await peer.until((m) => m.msg === 'removed', mark);
    const text = await scrape(t);
    assert.equal(value(text, 'perseid_publication_initial_documents_total{publication="byHand"}'), 2);
    assert.equal(value(text, 'perseid_publication_initial_bytes_total{publication="byHand"}'), bytes(initial));
    for (const kind of ['changed', 'removed']) {
      const sent = live.filter((l) => kindOf(l) === kind);
      assert.equal(sent.length, 1, kind);
      assert.equal(value(text, `perseid_publication_live_documents_total{publication="byHand",kind="${kind}"}`), 1, kind);
      assert.equal(value(text, `perseid_publication_live_bytes_total{publication="byHand",kind="${kind}"}`), bytes(sent), kind);
    }
    await peer.close();
  });

  it('counts new sessions by transport: raw WebSocket, SockJS over WebSocket, SockJS polling', async () => {
    const before = await scrape(t);
    const raw = await RawPeer.connected(t.wsUrl);
    const sockjs = await Promise.all(['websocket', 'xhr-polling', 'xhr-polling'].map((transport) => SockjsPeer.open(`${t.url}/sockjs`, transport)));
    for (const peer of sockjs) {
      peer.send({ msg: 'connect', version: '1', support: ['1'] });
      await peer.next((m) => m.msg === 'connected');
    }
    const after = await scrape(t);
    const opened = (transport: string) => {
      const series = `perseid_sessions_opened_by_transport_total{transport="${transport}"}`;
      return value(after, series) - value(before, series);
    };
    assert.deepEqual({ websocket: opened('websocket'), 'sockjs-websocket': opened('sockjs-websocket'), 'sockjs-xhr-polling': opened('sockjs-xhr-polling') }, { websocket: 1, 'sockjs-websocket': 1, 'sockjs-xhr-polling': 2 });
    raw.ws.close();
    for (const peer of sockjs) peer.close();
  });

  it('counts a SockJS polling client\'s output in the bytes sent', async () => {
    const peer = await SockjsPeer.open(`${t.url}/sockjs`, 'xhr-polling');
    peer.send({ msg: 'connect', version: '1', support: ['1'] });
    await peer.next((m) => m.msg === 'connected');
    const before = value(await scrape(t), 'perseid_bytes_sent_total');
    const mark = peer.received.length;
    peer.send({ msg: 'sub', id: 'p', name: 'notes', params: [] });
    await peer.next((m) => m.msg === 'ready');
    const received = peer.received.slice(mark);
    const sent = value(await scrape(t), 'perseid_bytes_sent_total') - before;
    // Only this connection is open: what it received (as JSON texts) is what was counted.
    assert.equal(sent, bytes(received.map((m) => JSON.stringify(m))));
    peer.close();
  });

  it('counts bytes before and after permessage-deflate on a compressing connection', async () => {
    const before = await scrape(t);
    const peer = await TextPeer.connected(t.wsUrl, true);
    assert.equal(peer.ws.extensions.includes('permessage-deflate'), true, 'deflate negotiated');
    peer.send({ msg: 'sub', id: 'b', name: 'blobs', params: [] });
    await peer.until((m) => m.msg === 'ready');
    const after = await scrape(t);
    const delta = (series: string) => value(after, series) - value(before, series);
    const input = delta('perseid_compression_input_bytes_total');
    const output = delta('perseid_compression_output_bytes_total');
    // Only this connection compresses: its input is every message it received, as received.
    assert.equal(input, bytes(peer.texts));
    assert.ok(output > 0 && output < input / 10, `a repetitive 24 KB document compresses well: ${output} of ${input} bytes`);
    assert.ok(delta('perseid_bytes_sent_total') >= output);
    await peer.close();
  });

  it('counts live queries by change source, beside the strategies', async () => {
    const peers = [await RawPeer.connected(t.wsUrl), await RawPeer.connected(t.wsUrl)];
    const started = 'perseid_live_queries_source_started_total{source="embedded"}';
    const running = 'perseid_live_queries_source_running{source="embedded"}';
    const before = await scrape(t);
    // Two distinct queries, one of them reused by the second client: two live queries start, both run.
    for (const [i, n] of [1, 2].entries()) {
      peers[0]!.send({ msg: 'sub', id: `a${i}`, name: 'itemsAbove', params: [n] });
      await peers[0]!.next((m) => m.msg === 'ready');
    }
    peers[1]!.send({ msg: 'sub', id: 'b', name: 'itemsAbove', params: [1] });
    await peers[1]!.next((m) => m.msg === 'ready');
    const after = await scrape(t);
    assert.equal(value(after, started) - value(before, started), 2);
    assert.ok(value(after, running) >= 2, `running: ${value(after, running)}`);
    // Every live query here follows the embedded write log: by source and by strategy agree.
    const strategies = (text: string, family: string) => ['set', 'window', 'requery'].reduce((n, s) => n + value(text, `${family}{strategy="${s}"}`), 0);
    assert.equal(value(after, started), strategies(after, 'perseid_live_queries_started_total'));
    assert.equal(value(after, running), strategies(after, 'perseid_live_queries_running'));
    for (const peer of peers) peer.ws.close();
  });

  it("counts a publish function's own reads in its subscription's db time", async () => {
    const peer = await RawPeer.connected(t.wsUrl);
    peer.send({ msg: 'sub', id: 'i', name: 'bigItems', params: [] });
    await peer.next((m) => m.msg === 'ready');
    const snapshot = (await (await fetch(`${t.url}/perseid/apm`)).json()) as ApmSnapshot;
    const trace = snapshot.reports[0]!.traces.find((tr) => tr.kind === 'sub' && tr.name === 'bigItems');
    assert.ok(trace, 'a trace of the subscription');
    const read = trace.events.find((e) => e.type === 'db' && e.op === 'find' && e.collection === 'items');
    assert.ok(read, `the handler's find is in the trace: ${JSON.stringify(trace.events)}`);
    assert.equal(read.shape, '{n: range}');
    assert.equal(read.docs, 5);
    const observe = trace.events.find((e) => e.type === 'db' && e.op === 'observe');
    assert.ok(observe, 'and the wait for its live query');
    assert.ok(trace.db >= read.duration + observe.duration - 0.01, `db ${trace.db} covers both (${read.duration} + ${observe.duration})`);
    peer.ws.close();
  });
});
