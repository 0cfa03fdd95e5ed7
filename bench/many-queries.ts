/**
 * "Many live queries" (issue #16): 10,000 users each subscribed to their own
 * inbox (10,000 live queries on one collection) and 200 writes a second, each
 * to one random inbox. The figure is server CPU per write with 10,000 live
 * queries against the same load with 10, measured in the same run (target:
 * within 2×); with `--unrouted`, also 10,000 with change routing turned off
 * (PERSEID_ROUTE_CHANGES=off: every change handed to every live query), which
 * is what the routing saves. Server on core 0, load on core 1, a fresh server
 * and store per case, cases alternating, medians of `--runs`.
 *
 * Usage: node dist/bench/many-queries.js [--runs 3] [--seconds 30] [--unrouted]
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describeRun, fmt, NEEDS, onCore, portFree, runGenerator, spawnChild, stopProcess, waitForHttp, BENCH_SERVER_FLAGS, benchOptions, tempDir } from './harness.js';
import { median } from './stats.js';

const HELP = `Many live queries: server CPU per write with 10,000 live queries vs 10, same run.

Usage: many-queries [options]
  --users <list>           users (= live queries) per case, comma-separated (default 10,10000)
  --per-connection <n>     users sharing one connection (default 100; 1 = a connection each)
  --rate <n>               writes per second (default 200)
  --seconds <s>            measured seconds per case, after the warm-up (default 30)
  --warmup <s>             seconds of writes before measuring (default 5)
  --runs <n>               runs of every case; medians are reported (default 3)
  --unrouted               also run the largest case with change routing off
  --out <file>             JSON results (default bench/results/many-queries.json)

${NEEDS}
No database: Perseid runs on its embedded store. Ports from 4400 up must be free.`;

const values = benchOptions(HELP, {
  users: { type: 'string', default: '10,10000' },
  'per-connection': { type: 'string', default: '100' },
  rate: { type: 'string', default: '200' },
  seconds: { type: 'string', default: '30' },
  warmup: { type: 'string', default: '5' },
  runs: { type: 'string', default: '3' },
  unrouted: { type: 'boolean', default: false },
  out: { type: 'string', default: join('bench', 'results', 'many-queries.json') },
});

interface Case {
  name: string;
  users: number;
  routed: boolean;
}

interface Outcome {
  users: number;
  connections: number;
  writes: number;
  delivered: number;
  errors: number;
  subscribeSeconds: number;
  serverCpuSeconds: number;
  serverCpuPercent: number;
  microsecondsPerWrite: number;
  generatorCpuPercent: number;
  serverPeakRssMb: number;
  latencyMs: { p50: number; p95: number; p99: number; max: number };
}

const userCounts = values.users!.split(',').map(Number);
if (userCounts.some((n) => !Number.isInteger(n) || n < 1)) {
  console.error(`--users must list positive whole numbers\n\n${HELP}`);
  process.exit(2);
}
const cases: Case[] = userCounts.map((users) => ({ name: `${users} live queries`, users, routed: true }));
if (values.unrouted) {
  const most = Math.max(...userCounts);
  cases.push({ name: `${most} live queries, routing off`, users: most, routed: false });
}

async function runCase(c: Case, port: number): Promise<Outcome> {
  const dataDir = tempDir('perseid-many-');
  const env = { ...process.env, PERSEID_ROUTE_CHANGES: c.routed ? 'on' : 'off' };
  const [cmd, args] = onCore(0, [
    'dist/src/cli/main.js', 'start', 'dist/bench/apps/inbox.js', '--port', String(port), '--data-dir', dataDir,
    ...BENCH_SERVER_FLAGS,
  ]);
  await portFree(port);
  const server = spawnChild(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'], env });
  try {
    await waitForHttp(port, '/perseid/stats', server);
    const out = await runGenerator(
      onCore(1, [
        'dist/bench/many-queries-load.js', '--url', `http://127.0.0.1:${port}`, '--users', String(c.users),
        '--per-connection', values['per-connection']!, '--rate', values.rate!, '--seconds', values.seconds!,
        '--warmup', values.warmup!, '--server-pid', String(server.pid),
      ]),
      server,
    );
    return JSON.parse(out.trim().split('\n').at(-1)!) as Outcome;
  } finally {
    await stopProcess(server);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const { commit, command, header } = describeRun(
  `Many live queries  ${values.rate} writes/s, ${values.seconds} s measured after ${values.warmup} s, ${values['per-connection']} users per connection`,
  'many-queries.js',
);
console.log(header);
const runs = Number(values.runs);
const results = new Map<Case, Outcome[]>(cases.map((c) => [c, []]));
let port = 4400;
for (let run = 1; run <= runs; run++) {
  for (const c of cases) {
    process.stderr.write(`run ${run}/${runs}: ${c.name}\n`);
    const outcome = await runCase(c, port++);
    process.stderr.write(`  ${fmt(outcome.microsecondsPerWrite, 0)} µs CPU per write, p99 ${fmt(outcome.latencyMs.p99)} ms, ${outcome.delivered}/${outcome.writes} delivered\n`);
    results.get(c)!.push(outcome);
  }
}

const m = (c: Case, pick: (o: Outcome) => number) => median(results.get(c)!.map(pick));
const base = cases[0]!;
console.log('| case | connections | writes (each run) | errors | µs server CPU / write | × fewest queries | server CPU % | p50 ms | p99 ms | subscribe s | peak RSS MB | generator CPU % |');
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const c of cases) {
  const runsOf = results.get(c)!;
  console.log(
    `| ${c.name} | ${runsOf[0]!.connections} | ${runsOf.map((o) => `${o.delivered}/${o.writes}`).join(', ')} | ${runsOf.reduce((a, o) => a + o.errors, 0)} | ${fmt(m(c, (o) => o.microsecondsPerWrite), 0)} | ${fmt(m(c, (o) => o.microsecondsPerWrite) / m(base, (o) => o.microsecondsPerWrite), 2)} | ${fmt(m(c, (o) => o.serverCpuPercent))} | ${fmt(m(c, (o) => o.latencyMs.p50))} | ${fmt(m(c, (o) => o.latencyMs.p99))} | ${fmt(m(c, (o) => o.subscribeSeconds))} | ${fmt(m(c, (o) => o.serverPeakRssMb), 0)} | ${fmt(m(c, (o) => o.generatorCpuPercent))} |`,
  );
}
mkdirSync(join(values.out!, '..'), { recursive: true });
writeFileSync(values.out!, JSON.stringify({ date: new Date().toISOString(), node: process.version, commit, command, cases: cases.map((c) => ({ ...c, runs: results.get(c) })) }, null, 2) + '\n');
console.log(`results written to ${values.out}`);
