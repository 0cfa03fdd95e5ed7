/**
 * The rates the dashboard and `perseid top` show (calls and subscriptions per
 * second) against what a real client (simpleddp) did: they are counts over
 * the time the recent window really covers, so a burst just after start reads
 * as the burst it was, and a steady load does not swing with the window's
 * rotation.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import SimpleDDP from 'simpleddp';
import WebSocket from 'ws';
import type { DashboardView } from '../src/metrics/dashboard-view.js';
import { startServer, type TestServer } from './helpers.js';

describe('rates on the dashboard', () => {
  let t: TestServer;
  let client: SimpleDDP;
  let started: number;

  before(async () => {
    // Before the server (and so the APM) starts: the recent window cannot cover more than this.
    started = Date.now();
    t = await startServer((server) => {
      server.methods({ ping: () => 'pong' });
      server.publish('nothing', function () {
        this.ready();
      });
    });
    client = new SimpleDDP({ endpoint: t.wsUrl, SocketConstructor: WebSocket, reconnectInterval: 100 });
    await client.connect();
  });

  after(async () => {
    await client?.disconnect();
    await t?.close();
  });

  it('divides the recent calls and subscriptions by the time the window covers', async () => {
    const firstCall = Date.now();
    for (let i = 0; i < 40; i++) await client.call('ping');
    for (let i = 0; i < 10; i++) {
      // A parameter of its own each time: simpleddp hands back a stopped subscription for the same ones.
      const sub = client.subscribe('nothing', i);
      await sub.ready();
      await sub.stop();
    }
    const view = (await (await fetch(`${t.url}/perseid/dashboard.json`)).json()) as DashboardView;
    const seconds = (Date.now() - started) / 1000;
    const atMost = Math.max(1, (Date.now() - firstCall) / 1000);
    const ping = view.methods.find((m) => m.name === 'ping');
    const sub = view.publications.find((p) => p.name === 'nothing');
    assert.ok(ping && sub, `rows for ping and nothing: ${JSON.stringify(view.methods)} ${JSON.stringify(view.publications)}`);
    // At least the count over the whole life of the server, at most over the time since the first call (1 s at least either way).
    assert.ok(ping.rate >= 40 / Math.max(1, seconds) && ping.rate <= 40 / atMost + 1e-9, `ping: ${ping.rate}/s for 40 calls in the ${seconds} s since start`);
    assert.ok(sub.rate >= 10 / Math.max(1, seconds) && sub.rate <= 10 / atMost + 1e-9, `nothing: ${sub.rate}/s for 10 subscriptions in the ${seconds} s since start`);
  });
});
