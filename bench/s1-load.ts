/**
 * BENCHMARKS.md S1 (tasks-reactive) load: clients arrive at --rate per second for
 * --duration seconds; each connects, subscribes to `fetchTasks`, clears its
 * tasks, inserts 20 tasks waiting each time for its own task's `added`, removes
 * them waiting for each `removed`, clears again and leaves. Prints one JSON
 * result on stdout (latencies in ms) and a progress line on stderr.
 *
 * Usage: node dist/bench/s1-load.js --url ws://127.0.0.1:3000/websocket --rate 8 --duration 60 [--think-ms 500]
 */
import { parseArgs } from 'node:util';
import { Random, RandomStream, collectionIdSequence } from '../src/ddp/random.js';
import { LeanSocket } from './lean-socket.js';
import { summarize, type Summary } from './stats.js';

const HELP = `S1 tasks-reactive load generator.

Usage: s1-load --url <ws url> [--rate <clients/s>] [--duration <s>] [--think-ms <ms>] [--timeout-ms <ms>]

  --url         WebSocket URL of the server (default ws://127.0.0.1:3000/websocket)
  --rate        clients arriving per second (default 4)
  --duration    seconds during which clients arrive (default 60)
  --think-ms    pause between a client's actions (default 0)
  --timeout-ms  give up on one action after this long (default 30000)
  --tasks       tasks each client inserts and removes (default 20)`;

export interface S1Result {
  clients: number;
  completed: number;
  errors: Record<string, number>;
  wallSeconds: number;
  latency: Summary;
  connect: Summary;
  operations: number;
  bytesIn: number;
  generatorCpuSeconds: number;
}

const { values } = parseArgs({
  options: {
    url: { type: 'string', default: 'ws://127.0.0.1:3000/websocket' },
    rate: { type: 'string', default: '4' },
    duration: { type: 'string', default: '60' },
    'think-ms': { type: 'string', default: '0' },
    'timeout-ms': { type: 'string', default: '30000' },
    tasks: { type: 'string', default: '20' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  console.log(HELP);
  process.exit(0);
}
const url = new URL(values.url!);
if (!['127.0.0.1', 'localhost', '::1', '[::1]'].includes(url.hostname) && !url.hostname.startsWith('127.')) {
  console.error('s1-load only targets loopback addresses');
  process.exit(2);
}
const rate = Number(values.rate);
const duration = Number(values.duration);
const thinkMs = Number(values['think-ms']);
const timeoutMs = Number(values['timeout-ms']);
const taskCount = Number(values.tasks);
if (!(rate > 0) || !(duration > 0) || !(thinkMs >= 0) || !(timeoutMs > 0) || !(taskCount > 0)) {
  console.error(HELP);
  process.exit(2);
}

const latencies: number[] = [];
const connectTimes: number[] = [];
const errors: Record<string, number> = {};
const sockets = new Set<LeanSocket>();
let completed = 0;
let started = 0;
let finished = 0;
let bytesIn = 0;

const sleep = (ms: number) => (ms > 0 ? new Promise((r) => setTimeout(r, ms)) : Promise.resolve());

async function runClient(index: number): Promise<void> {
  const sessionId = `${Random.id(8)}-${index}`;
  let methodId = 0;
  const connectStart = performance.now();
  const socket = await LeanSocket.open(url.hostname.replace(/^\[|\]$/g, ''), Number(url.port || 80), url.pathname, timeoutMs);
  sockets.add(socket);
  try {
    socket.send('{"msg":"connect","version":"1","support":["1","pre2","pre1"]}');
    await socket.waitFor('"msg":"connected"', timeoutMs);
    socket.send('{"msg":"sub","id":"s1","name":"fetchTasks","params":[]}');
    await socket.waitFor('"subs":["s1"]', timeoutMs);
    connectTimes.push(performance.now() - connectStart);
    const call = async (method: string, args: object, waitFor?: string, randomSeed?: string) => {
      const id = String(++methodId);
      const seed = randomSeed ? `,"randomSeed":"${randomSeed}"` : '';
      const t = performance.now();
      socket.send(`{"msg":"method","id":"${id}","method":"${method}","params":[${JSON.stringify(args)}]${seed}}`);
      await socket.waitFor(waitFor ?? `"methods":["${id}"]`, timeoutMs);
      return performance.now() - t;
    };
    await sleep(thinkMs);
    await call('removeAllTasks', { sessionId });
    const ids: string[] = [];
    for (let i = 0; i < taskCount; i++) {
      await sleep(thinkMs);
      // The seed lets us know the id the server will give the task, as Meteor's client stub does.
      const seed = Random.hexString(20);
      const taskId = collectionIdSequence(new RandomStream(seed), 'taskCollection').id();
      ids.push(taskId);
      latencies.push(await call('insertTask', { description: `task ${i} of ${sessionId}`, sessionId }, `"id":"${taskId}"`, seed));
    }
    for (const taskId of ids) {
      await sleep(thinkMs);
      latencies.push(await call('removeTask', { taskId }, `"id":"${taskId}"`));
    }
    await sleep(thinkMs);
    await call('removeAllTasks', { sessionId });
    completed++;
  } finally {
    bytesIn += socket.bytesIn;
    sockets.delete(socket);
    socket.close();
  }
}

function record(error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  const kind = message.startsWith('timeout') ? 'timeout' : message.replace(/ .*/, '');
  errors[kind] = (errors[kind] ?? 0) + 1;
}

// Clients waiting on a slow server still prove they are alive, so the server's heartbeat does not drop them.
const keepAlive = setInterval(() => {
  const now = Date.now();
  for (const socket of sockets) if (now - socket.lastSend > 10000) socket.send('{"msg":"ping"}');
}, 2000);

// A live line on a terminal; a line every 10 s in logs.
const tty = process.stderr.isTTY;
const progress = setInterval(() => {
  const seconds = Math.round((performance.now() - t0) / 1000);
  if (!tty && seconds % 10 !== 0) return;
  const errorCount = Object.values(errors).reduce((a, b) => a + b, 0);
  const line = `  s1: ${seconds}s  clients ${started}/${total}  active ${started - finished}  done ${completed}  errors ${errorCount}`;
  process.stderr.write(tty ? `\r${line}   ` : `${line}\n`);
}, 1000);

const total = Math.round(rate * duration);
const t0 = performance.now();
const cpu0 = process.cpuUsage();
const runs: Array<Promise<void>> = [];
for (let i = 0; i < total; i++) {
  const due = t0 + (i * 1000) / rate;
  await sleep(due - performance.now());
  started++;
  runs.push(
    runClient(i)
      .catch(record)
      .finally(() => finished++),
  );
}
await Promise.all(runs);
clearInterval(keepAlive);
clearInterval(progress);
if (tty) process.stderr.write('\n');
const cpu = process.cpuUsage(cpu0);
const result: S1Result = {
  clients: total,
  completed,
  errors,
  wallSeconds: (performance.now() - t0) / 1000,
  latency: summarize(latencies),
  connect: summarize(connectTimes),
  operations: latencies.length,
  bytesIn,
  generatorCpuSeconds: (cpu.user + cpu.system) / 1e6,
};
process.stdout.write(JSON.stringify(result) + '\n');
