/**
 * A real Prometheus (Debian's `prometheus`) scrapes a real `perseid start
 * --workers 2` on mongo-java-server: one scrape of the primary covers both
 * workers (a `worker` label on every series), the primary's own process
 * (`worker="primary"`) and each worker's load summary (`server` label), and
 * Prometheus's query API returns the method calls this test made, and promtool's lint accepts every
 * family. Prometheus runs on loopback from a temporary config and data directory, and stops with the test.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import SimpleDDP from 'simpleddp';
import WebSocket from 'ws';
import { serviceUrl } from '../scripts/services/control.js';
import { freshDatabase } from './databases.js';
import { eventually, exited, startPerseid, type PerseidProcess } from './processes.js';
import { needs, needsServices } from './skips.js';
import { freePort } from '../scripts/services/process.js';

const APP = 'dist/test/fixtures/cluster-app.js';
const mongo = await serviceUrl('mongo-java-server');
const prometheusFound = spawnSync('prometheus', ['--version']).status === 0;
const promtoolFound = spawnSync('promtool', ['--version']).status === 0;
const skip = needsServices({ 'mongo-java-server': mongo }) || (!prometheusFound && needs('Prometheus', 'apt-get install prometheus'));


interface PromResult {
  metric: Record<string, string>;
  value: [number, string];
}

describe('Prometheus scrapes a primary with two workers', { skip }, () => {
  let primary: PerseidProcess;
  let database: ReturnType<typeof freshDatabase>;
  let prometheus: ChildProcess | undefined;
  let promUrl = '';
  let promLog = '';
  const dir = mkdtempSync(join(tmpdir(), 'perseid-prometheus-'));
  const clients: SimpleDDP[] = [];

  async function query(expr: string): Promise<PromResult[]> {
    const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(expr)}`);
    const body = (await res.json()) as { status: string; data: { result: PromResult[] } };
    assert.equal(body.status, 'success', JSON.stringify(body));
    return body.data.result;
  }

  before(async () => {
    database = freshDatabase(mongo!);
    primary = await startPerseid(APP, ['--port', '0', '--workers', '2'], { MONGO_URL: database.url, PERSEID_LOG_LEVEL: 'info' });
    const port = await freePort();
    promUrl = `http://127.0.0.1:${port}`;
    writeFileSync(
      join(dir, 'prometheus.yml'),
      `global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: perseid\n    metrics_path: /metrics\n    static_configs:\n      - targets: ['127.0.0.1:${primary.port}']\n`,
    );
    prometheus = spawn('prometheus', [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`], { stdio: ['ignore', 'pipe', 'pipe'] });
    prometheus.stderr!.on('data', (chunk: Buffer) => void (promLog += chunk.toString()));
    await eventually(async () => (await fetch(`${promUrl}/-/ready`).catch(() => undefined))?.status === 200, `Prometheus to be ready: ${promLog.slice(-500)}`, 30000);
  });

  after(async () => {
    await Promise.all(clients.map((c) => c.disconnect().catch(() => undefined)));
    if (prometheus && prometheus.exitCode === null) {
      prometheus.kill('SIGTERM');
      await exited(prometheus);
    }
    if (primary) await primary.stop('SIGTERM');
    await database?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('one scrape of the primary covers every worker, and the query API returns the calls made', async () => {
    // The primary picks the least loaded worker, lag counting: wait until neither lags (as workers.test.ts
    // does), then open connections, kept open so they count, until each worker has one.
    const view = async () => ((await (await fetch(`${primary.url}/perseid/stats`)).json()) as { workers: Array<{ lagMs: number }> }).workers;
    await eventually(async () => (await view()).every((w) => w.lagMs < 20), 'both workers without event-loop lag', 20000);
    const byWorker = new Map<string, SimpleDDP>();
    for (let i = 0; i < 20 && byWorker.size < 2; i++) {
      const client = new SimpleDDP({ endpoint: `${primary.url.replace(/^http/, 'ws')}/websocket`, SocketConstructor: WebSocket, reconnectInterval: 100 });
      clients.push(client);
      await client.connect();
      const who = (await client.call('whoami')) as { worker: string };
      if (!byWorker.has(who.worker)) byWorker.set(who.worker, client);
    }
    assert.equal(byWorker.size, 2, 'a client on each worker');
    const calls = new Map<string, number>();
    for (const [worker, client] of byWorker) {
      const n = worker === '1' ? 7 : 4;
      for (let i = 0; i < n; i++) await client.call('addItem', i, `w${worker}`);
      calls.set(worker, n);
    }

    const text = await (await fetch(`${primary.url}/metrics`)).text();
    for (const [worker, n] of calls) {
      assert.match(text, new RegExp(`^perseid_method_duration_seconds_count\\{worker="${worker}",method="addItem"\\} ${n}$`, 'm'));
      assert.match(text, new RegExp(`^perseid_process_resident_memory_bytes\\{worker="${worker}"\\} \\d+$`, 'm'));
    }
    assert.equal(text.match(/^# TYPE perseid_method_duration_seconds histogram$/gm)?.length, 1, 'one family, with a series per worker');
    // The primary's own process, labelled as the primary, and every worker's summary, labelled by server.
    assert.match(text, /^perseid_process_resident_memory_bytes\{worker="primary"\} \d+$/m);
    assert.match(text, /^perseid_process_heap_used_bytes\{worker="primary"\} \d+$/m);
    assert.match(text, /^perseid_process_cpu_seconds_total\{worker="primary",mode="user"\} [\d.e-]+$/m);
    assert.match(text, /^perseid_event_loop_delay_seconds_count\{worker="primary"\} \d+$/m);
    // A worker reports its load every second: its client shows once it has.
    let summaries = text;
    const hasSession = (worker: string) => new RegExp(`^perseid_server_sessions\\{server="worker-${worker}"\\} [1-9]\\d*$`, 'm').test(summaries);
    await eventually(async () => {
      summaries = await (await fetch(`${primary.url}/metrics`)).text();
      return [...calls.keys()].every(hasSession);
    }, 'each worker\'s summary to count its client', 10000);
    for (const worker of calls.keys()) {
      for (const family of ['cpu_percent', 'event_loop_delay_seconds', 'resident_memory_bytes', 'methods_per_second', 'method_p95_seconds']) {
        assert.match(summaries, new RegExp(`^perseid_server_${family}\\{server="worker-${worker}"\\} [\\d.e-]+$`, 'm'));
      }
    }
    // The database work of the calls is there too, per collection and operation.
    assert.match(text, /^perseid_db_operation_duration_seconds_count\{worker="\d",collection="items",operation="insert"\} \d+$/m);
    assert.match(text, /^perseid_mongodb_command_duration_seconds_count\{worker="\d",command="insert"\} \d+$/m);

    let total: PromResult[] = [];
    await eventually(
      async () => {
        total = await query('sum by (worker) (perseid_method_duration_seconds_count{method="addItem"})');
        return total.length === 2 && total.every((r) => Number(r.value[1]) === calls.get(r.metric.worker!));
      },
      `Prometheus to scrape the calls: ${JSON.stringify(total)}`,
      20000,
    );
    const up = await query('up{job="perseid"}');
    assert.equal(up[0]?.value[1], '1');
    // Both workers and the primary.
    const processes = await query('count(count by (worker) (perseid_process_cpu_seconds_total))');
    assert.equal(processes[0]?.value[1], '3');
  });

  it('serves names promtool\'s lint accepts: base units, counters ending in _total', { skip: !promtoolFound && needs('promtool', 'apt-get install prometheus') }, async () => {
    const text = await (await fetch(`${primary.url}/metrics`)).text();
    const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    assert.equal(lint.status, 0, `${lint.stdout}${lint.stderr}`);
  });
});
