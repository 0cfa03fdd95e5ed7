/**
 * Runs BENCHMARKS.md S1 against Perseid and the bare-`ws` baselines in the same
 * run, the server pinned to core 0 and the load generator to core 1, and prints
 * medians of --runs runs with ratios against the fast baseline.
 *
 * Usage: node dist/bench/s1.js [--rate 8] [--duration 60] [--think-ms 0] [--runs 3] [--targets perseid,fast,naive]
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { describeRun, fmt, onCore, runGenerator, serverStats, stopProcess, waitForHttp } from './harness.js';
import { ProcessSampler } from './process-sampler.js';
import { median } from './stats.js';
import type { S1Result } from './s1-load.js';

const HELP = `S1 tasks-reactive: Perseid against the bare-ws limit baseline, in one run.

Usage: s1 [options]
  --rate <n>         clients arriving per second (default 8)
  --duration <s>     seconds of arrivals (default 60)
  --think-ms <ms>    pause between a client's actions (default 0)
  --runs <n>         runs per target; medians are reported (default 3)
  --targets <list>   any of perseid,fast,naive (default all three)
  --out <file>       also write the results as JSON (default bench/results/s1-<rate>-<think>.json)`;

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '8' },
    duration: { type: 'string', default: '60' },
    'think-ms': { type: 'string', default: '0' },
    runs: { type: 'string', default: '3' },
    targets: { type: 'string', default: 'perseid,fast,naive' },
    out: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (values.help) {
  console.log(HELP);
  process.exit(0);
}

const TARGETS: Record<string, (port: number, dataDir: string) => string[]> = {
  perseid: (port, dataDir) => ['dist/src/cli/main.js', 'start', 'dist/examples/tasks/app.js', '--port', String(port), '--data-dir', dataDir, '--log-level', 'warn'],
  fast: (port) => ['dist/bench/baseline-server.js', '--port', String(port), '--mode', 'fast'],
  naive: (port) => ['dist/bench/baseline-server.js', '--port', String(port), '--mode', 'naive'],
};
const targets = values.targets!.split(',');
for (const t of targets) {
  if (!TARGETS[t]) {
    console.error(`unknown target ${t}\n\n${HELP}`);
    process.exit(2);
  }
}
const runs = Number(values.runs);

interface RunOutcome {
  target: string;
  load: S1Result;
  serverCpuSeconds: number;
  peakRssMb: number;
  messagesSent: number;
}

async function runOnce(target: string, port: number): Promise<RunOutcome> {
  const dataDir = mkdtempSync(join(tmpdir(), 'perseid-s1-'));
  const [cmd, args] = onCore(0, TARGETS[target]!(port, dataDir));
  const server = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  try {
    await waitForHttp(port, '/perseid/stats');
    const sampler = new ProcessSampler(server.pid!);
    const out = await runGenerator(
      onCore(1, ['dist/bench/s1-load.js', '--url', `ws://127.0.0.1:${port}/websocket`, '--rate', values.rate!, '--duration', values.duration!, '--think-ms', values['think-ms']!]),
    );
    const { cpuSeconds, peakRssMb } = sampler.stop();
    const stats = await serverStats(port);
    return { target, load: JSON.parse(out) as S1Result, serverCpuSeconds: cpuSeconds, peakRssMb, messagesSent: stats.perseid_messages_sent_total ?? NaN };
  } finally {
    await stopProcess(server);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const { commit, command, header } = describeRun(`S1 tasks-reactive  rate ${values.rate}/s  duration ${values.duration}s  think ${values['think-ms']} ms  runs ${runs}`, 's1.js');
console.log(header);

const outFile = values.out ?? join('bench', 'results', `s1-rate${values.rate}-think${values['think-ms']}.json`);
mkdirSync(join(outFile, '..'), { recursive: true });
const save = (rows?: unknown) =>
  writeFileSync(outFile, JSON.stringify({ date: new Date().toISOString(), node: process.version, commit, command, rows, outcomes }, null, 2) + '\n');

const outcomes: RunOutcome[] = [];
let port = 4100;
for (let run = 1; run <= runs; run++) {
  for (const target of targets) {
    process.stderr.write(`run ${run}/${runs}: ${target}\n`);
    outcomes.push(await runOnce(target, port++));
    save(); // a run that fails later does not lose the ones before
  }
}

interface Row {
  target: string;
  wall: number;
  cpu: number;
  cpuPct: number;
  rss: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  errors: number;
  completed: number;
  clients: number;
  messages: number;
  usPerMessage: number;
  genCpu: number;
}

const rows: Row[] = targets.map((target) => {
  const mine = outcomes.filter((o) => o.target === target);
  const m = (f: (o: RunOutcome) => number) => median(mine.map(f));
  return {
    target,
    wall: m((o) => o.load.wallSeconds),
    cpu: m((o) => o.serverCpuSeconds),
    cpuPct: m((o) => (100 * o.serverCpuSeconds) / o.load.wallSeconds),
    rss: m((o) => o.peakRssMb),
    p50: m((o) => o.load.latency.p50),
    p95: m((o) => o.load.latency.p95),
    p99: m((o) => o.load.latency.p99),
    max: m((o) => o.load.latency.max),
    errors: m((o) => Object.values(o.load.errors).reduce((a, b) => a + b, 0)),
    completed: m((o) => o.load.completed),
    clients: m((o) => o.load.clients),
    messages: m((o) => o.messagesSent),
    usPerMessage: m((o) => (1e6 * o.serverCpuSeconds) / o.messagesSent),
    genCpu: m((o) => o.load.generatorCpuSeconds),
  };
});

const fast = rows.find((r) => r.target === 'fast');
const table = [
  '| server | wall s | server CPU s | CPU % | peak RSS MB | p50 ms | p95 ms | p99 ms | max ms | completed | errors | messages sent | µs CPU / message | CPU × fast |',
  '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ...rows.map(
    (r) =>
      `| ${r.target} | ${fmt(r.wall)} | ${fmt(r.cpu, 2)} | ${fmt(r.cpuPct)} | ${fmt(r.rss, 0)} | ${fmt(r.p50)} | ${fmt(r.p95)} | ${fmt(r.p99)} | ${fmt(r.max)} | ${r.completed}/${r.clients} | ${r.errors} | ${fmt(r.messages, 0)} | ${fmt(r.usPerMessage, 2)} | ${fast ? fmt(r.cpu / fast.cpu, 2) : '-'} |`,
  ),
];
console.log(table.join('\n'));
console.log(`\nload generator CPU s (median): ${rows.map((r) => `${r.target} ${fmt(r.genCpu, 2)}`).join(', ')}`);

save(rows);
console.log(`results written to ${outFile}`);
