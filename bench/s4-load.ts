/**
 * BENCHMARKS.md S4 (chat) load: --users clients, each in one of --groups
 * groups, subscribed to its group's messages, each sending one message every
 * --interval-ms for --duration seconds. Latency is call → `updated`, by which
 * time the message is in the sender's own subscription. Prints one JSON result.
 *
 * Usage: node dist/bench/s4-load.js --url http://127.0.0.1:3000 [--users 50] [--groups 25] [--interval-ms 2000] [--duration 180]
 */
import { parseArgs } from 'node:util';
import { DDPClient } from '../src/client/node.js';
import { summarize, type Summary } from './stats.js';

const HELP = 'Usage: s4-load --url <server> [--users 50] [--groups 25] [--interval-ms 2000] [--duration 180]';
const { values } = parseArgs({
  options: {
    url: { type: 'string', default: 'http://127.0.0.1:3000' },
    users: { type: 'string', default: '50' },
    groups: { type: 'string', default: '25' },
    'interval-ms': { type: 'string', default: '2000' },
    duration: { type: 'string', default: '180' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  console.log(HELP);
  process.exit(0);
}
const url = new URL(values.url!);
if (!url.hostname.startsWith('127.') && url.hostname !== 'localhost' && url.hostname !== '[::1]') {
  console.error('s4-load only targets loopback addresses');
  process.exit(2);
}
const users = Number(values.users);
const groups = Number(values.groups);
const intervalMs = Number(values['interval-ms']);
const durationMs = Number(values.duration) * 1000;

export interface S4Result {
  users: number;
  sent: number;
  received: number;
  errors: number;
  latency: Summary;
  generatorCpuSeconds: number;
}

const latencies: number[] = [];
let sent = 0;
let received = 0;
let errors = 0;
const cpu0 = process.cpuUsage();
const clients = await Promise.all(
  Array.from({ length: users }, async (_, i) => {
    const client = new DDPClient(url.toString(), { autoReconnect: false });
    await client.subscribe('messages', `group-${i % groups}`).ready;
    client.collection('messages').onChange((change) => {
      if (change.type === 'added') received++;
    });
    return client;
  }),
);
received = 0; // count only what arrives during the run, not the initial history
const t0 = performance.now();
await Promise.all(
  clients.map(async (client, i) => {
    // Spread the users' sends over the interval.
    await new Promise((r) => setTimeout(r, (i * intervalMs) / users));
    for (let n = 0; performance.now() - t0 < durationMs; n++) {
      const started = performance.now();
      try {
        await client.call('sendMessage', { group: `group-${i % groups}`, message: `message ${n} from user ${i}` });
        latencies.push(performance.now() - started);
        sent++;
      } catch {
        errors++;
      }
      await new Promise((r) => setTimeout(r, Math.max(0, started + intervalMs - performance.now())));
    }
  }),
);
for (const client of clients) client.disconnect();
const cpu = process.cpuUsage(cpu0);
const result: S4Result = { users, sent, received, errors, latency: summarize(latencies), generatorCpuSeconds: (cpu.user + cpu.system) / 1e6 };
process.stdout.write(JSON.stringify(result) + '\n');
