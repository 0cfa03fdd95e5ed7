/**
 * The load side of bench/many-queries.ts (run by it on the load core): `users`
 * users each subscribe to their own inbox, `per-connection` of them sharing a
 * connection; then one writer sends `rate` messages a second to random users
 * and times each from the call until the `added` reaches its user. Server CPU
 * is read from /proc over the measured window only (after the warm-up), so
 * connecting and subscribing are not counted per write. Prints one JSON line.
 */
import { parseArgs } from 'node:util';
import { LeanLoadClient } from '../src/load/clients.js';
import type { ClientCounters } from '../src/load/load-client.js';
import { cpuSeconds } from '../src/load/process-table.js';
import { readFileSync } from 'node:fs';

const USAGE = `node dist/bench/many-queries-load.js --url <ws-url> --server-pid <pid> [--users n] [--per-connection n] [--rate n] [--seconds n] [--warmup n]
The load side of many-queries.js, which starts it with a server on the other core: run that one instead
(node dist/bench/many-queries.js --help). Prints one JSON line.`;

function usageError(message: string): never {
  console.error(`many-queries-load: ${message}\n${USAGE}`);
  process.exit(2);
}

let parsed: ReturnType<typeof parseOptions>;
try {
  parsed = parseOptions();
} catch (error) {
  usageError((error as Error).message);
}
if (parsed.values.help) {
  console.log(USAGE);
  process.exit(0);
}
if (!parsed.values.url || !parsed.values['server-pid']) usageError('--url and --server-pid are needed');
const { values } = parsed;

function parseOptions() {
  return parseArgs({
    options: {
      help: { type: 'boolean', short: 'h' },
      url: { type: 'string' },
      users: { type: 'string', default: '10000' },
      'per-connection': { type: 'string', default: '100' },
      rate: { type: 'string', default: '200' },
      seconds: { type: 'string', default: '30' },
      warmup: { type: 'string', default: '5' },
      'server-pid': { type: 'string' },
    },
  });
}
const users = Number(values.users);
const perConnection = Number(values['per-connection']);
const rate = Number(values.rate);
const serverPid = Number(values['server-pid']);
const url = values.url!;
const TIMEOUT_MS = 60000;

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function rssMb(pid: number): number {
  const match = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) / 1024 : NaN;
}

/** Runs `tasks` with at most `limit` under way at once. */
async function pooled(count: number, limit: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, count) }, async () => {
      while (next < count) await task(next++);
    }),
  );
}

const counters: ClientCounters = { messagesIn: 0, bytesIn: 0, messagesOut: 0, bytesOut: 0 };
const connectionCount = Math.ceil(users / perConnection);
const clients: LeanLoadClient[] = new Array(connectionCount);
const t0 = performance.now();
await pooled(connectionCount, 50, async (c) => {
  clients[c] = await LeanLoadClient.connect(url, counters, TIMEOUT_MS);
});
await pooled(users, 200, async (u) => {
  await clients[Math.floor(u / perConnection)]!.subscribe('inbox', `user${u}`);
});
const subscribeSeconds = (performance.now() - t0) / 1000;
process.stderr.write(`${users} users subscribed on ${connectionCount} connections in ${subscribeSeconds.toFixed(1)} s\n`);

const writer = await LeanLoadClient.connect(url, counters, TIMEOUT_MS);
const latencies: number[] = [];
let errors = 0;
let measuring = false;
let sentInWindow = 0;
const outstanding = new Set<Promise<void>>();

function sendOne(): void {
  const u = Math.floor(Math.random() * users);
  const { randomSeed, id } = writer.seededInsert('messages');
  const timed = measuring;
  if (timed) sentInWindow++;
  const started = performance.now();
  const done = clients[Math.floor(u / perConnection)]!
    .expect('added', 'messages', id, () => writer.apply('send', [{ to: `user${u}`, text: `message to user ${u}` }], { randomSeed }))
    .then(
      () => {
        if (timed) latencies.push(performance.now() - started);
      },
      () => {
        errors++;
      },
    )
    .finally(() => outstanding.delete(done));
  outstanding.add(done);
}

/** Sends at `rate` per second (open loop: a slow server does not slow the sending) for `seconds`. */
async function sendFor(seconds: number): Promise<void> {
  const start = performance.now();
  let sent = 0;
  while (performance.now() - start < seconds * 1000) {
    const due = Math.floor(((performance.now() - start) / 1000) * rate);
    while (sent < due) {
      sendOne();
      sent++;
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

await sendFor(Number(values.warmup));
measuring = true;
const cpu0 = cpuSeconds(serverPid);
const generatorCpu0 = process.cpuUsage();
const windowStart = performance.now();
await sendFor(Number(values.seconds));
const windowSeconds = (performance.now() - windowStart) / 1000;
const serverCpu = cpuSeconds(serverPid) - cpu0;
const generatorCpu = process.cpuUsage(generatorCpu0);
measuring = false;
await Promise.all(outstanding);
latencies.sort((a, b) => a - b);
const result = {
  users,
  connections: connectionCount,
  rate,
  subscribeSeconds,
  windowSeconds,
  writes: sentInWindow,
  delivered: latencies.length,
  errors,
  serverCpuSeconds: serverCpu,
  serverCpuPercent: (100 * serverCpu) / windowSeconds,
  microsecondsPerWrite: (1e6 * serverCpu) / sentInWindow,
  generatorCpuPercent: (100 * (generatorCpu.user + generatorCpu.system)) / 1e6 / windowSeconds,
  serverPeakRssMb: rssMb(serverPid),
  latencyMs: { p50: percentile(latencies, 50), p95: percentile(latencies, 95), p99: percentile(latencies, 99), max: latencies.at(-1) ?? NaN },
};
await Promise.all([writer, ...clients].map((c) => c.close()));
console.log(JSON.stringify(result));
