/**
 * BENCHMARKS.md S6, capacity (issue #16), as a program:
 * - idle: C connections arrive (1,000 a second), each subscribes, then all stay
 *   idle with heartbeats for `--hold` seconds. Memory per connection = (server
 *   RSS while all C are held − RSS before any) / C (target ≤ 16 KB).
 * - storm: C clients connect and subscribe within one second; time until the
 *   last is ready, and errors (target: all ready in < 10 s, none).
 * A fresh server (the tasks example, embedded store) per phase and run, on core
 * 0; `perseid load s6 --processes n` on core 1. Both processes get their
 * file-descriptor limit raised to the hard limit (`ulimit -n`), which must
 * exceed C plus some headroom. Medians of `--runs`.
 *
 * Usage: node dist/bench/s6.js [--connections 10000] [--hold 40] [--processes 2] [--runs 3]
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LoadReport } from '../src/load/report/model.js';
import { describeRun, fmt, NEEDS, onCore, portFree, readReport, runGenerator, serverStats, spawnChild, stopProcess, waitForHttp, BENCH_SERVER_FLAGS, benchOptions, tempDir } from './harness.js';
import { median } from './stats.js';

const HELP = `S6 capacity: memory per idle connection, and a connection storm.

Usage: s6 [options]
  --connections <n>   connections held, and clients in the storm (default 10000)
  --hold <s>          seconds the idle connections are held (default 40; heartbeats every 15 s)
  --processes <n>     generator processes (perseid load --processes; default 2)
  --runs <n>          runs of each phase; medians are reported (default 3)
  --phases <list>     idle,storm (default both)
  --out <file>        JSON results (default bench/results/s6.json)

${NEEDS}
Server and generators each hold --connections sockets: the hard limit of open files (ulimit -Hn)
must be above that. Ports from 4500 up must be free.`;

const values = benchOptions(HELP, {
  connections: { type: 'string', default: '10000' },
  hold: { type: 'string', default: '40' },
  processes: { type: 'string', default: '2' },
  runs: { type: 'string', default: '3' },
  phases: { type: 'string', default: 'idle,storm' },
  out: { type: 'string', default: join('bench', 'results', 's6.json') },
});
const connections = Number(values.connections);
const hold = Number(values.hold);
const phases = values.phases!.split(',');
const hardLimit = spawnSync('sh', ['-c', 'ulimit -Hn']).stdout.toString().trim();
const needed = connections + 1024;
if (hardLimit !== 'unlimited' && Number(hardLimit) < needed) {
  console.error(`The hard limit on open files is ${hardLimit}; ${connections} connections need at least ${needed}. Raise it (e.g. \`ulimit -Hn ${needed}\` as root, or LimitNOFILE in a service) and run again.`);
  process.exit(2);
}

/** Runs `command` with the soft open-files limit raised to the hard one. */
function withFileLimit([cmd, args]: [string, string[]]): [string, string[]] {
  return ['sh', ['-c', 'ulimit -n "$(ulimit -Hn)" && exec "$@"', 'sh', cmd, ...args]];
}

function rssMb(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) / 1024 : NaN;
}

interface IdleOutcome {
  baselineRssMb: number;
  heldRssMb: number;
  /** Sessions open while the held RSS was read (all of them, unless some failed to connect). */
  sessions: number;
  held: number;
  errorKinds: Record<string, number>;
  kbPerConnection: number;
  errors: number;
  generatorCpuSeconds: number;
}

interface StormOutcome {
  ready: number;
  errors: number;
  errorKinds: Record<string, number>;
  /** Seconds from the first arrival until the last client was ready (1 s resolution, from the per-second timeline). */
  allReadyWithinSeconds: number;
  connectP99Ms: number;
  subscribeP99Ms: number;
  maxConnectPlusSubscribeMs: number;
  serverPeakRssMb: number;
  generatorCpuSeconds: number;
}

const errorsOf = (report: LoadReport) => report.users.failed + Object.values(report.errors).reduce((a, b) => a + b, 0);

async function withServer<T>(port: number, run: (pid: number, dir: string) => Promise<T>): Promise<T> {
  const dataDir = tempDir('perseid-s6-');
  await portFree(port);
  const server = spawnChild(
    ...withFileLimit(onCore(0, ['dist/src/cli/main.js', 'start', 'dist/examples/tasks/app.js', '--port', String(port), '--data-dir', dataDir, ...BENCH_SERVER_FLAGS])),
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  try {
    await waitForHttp(port, '/perseid/stats', server);
    return await run(server.pid!, dataDir);
  } finally {
    await stopProcess(server);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

function load(port: number, jsonFile: string, args: string[]): Promise<string> {
  return runGenerator(
    withFileLimit(
      onCore(1, ['dist/src/cli/main.js', 'load', 's6', '--url', `http://127.0.0.1:${port}`, '--processes', values.processes!, '--max-users', String(connections), '--json', jsonFile, ...args]),
    ),
  );
}

async function idle(port: number): Promise<IdleOutcome> {
  return withServer(port, async (pid, dir) => {
    // Settled after start-up: what the server holds with no connection.
    await new Promise((r) => setTimeout(r, 3000));
    const baselineRssMb = rssMb(pid);
    const jsonFile = join(dir, 'idle.json');
    const rate = Math.min(1000, connections);
    const samples: Array<{ sessions: number; rss: number }> = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const stats = await serverStats(port);
        samples.push({ sessions: stats.perseid_sessions ?? 0, rss: rssMb(pid) });
        await new Promise((r) => setTimeout(r, 1000));
      }
    })();
    await load(port, jsonFile, ['--rate', String(rate), '--duration', String(connections / rate), '--param', `hold=${hold}`, '--grace', String(hold + 120)]);
    sampling = false;
    await sampler;
    const report = readReport(jsonFile);
    // While the crowd was at its largest (all C, unless some could not connect).
    const most = Math.max(0, ...samples.map((s) => s.sessions));
    const held = samples.filter((s) => s.sessions >= most * 0.999 && s.sessions > 0);
    const heldRssMb = held.length ? median(held.map((s) => s.rss)) : NaN;
    return {
      baselineRssMb,
      heldRssMb,
      sessions: most,
      held: report.counts['connections held'] ?? 0,
      errorKinds: report.errors,
      kbPerConnection: ((heldRssMb - baselineRssMb) * 1024) / most,
      errors: errorsOf(report),
      generatorCpuSeconds: report.generatorCpuSeconds,
    };
  });
}

async function storm(port: number): Promise<StormOutcome> {
  return withServer(port, async (_pid, dir) => {
    const jsonFile = join(dir, 'storm.json');
    await load(port, jsonFile, ['--rate', String(connections), '--duration', '1', '--param', 'hold=5', '--server-pid', String(_pid)]);
    const report = readReport(jsonFile);
    const lastReady = report.timeline.reduce((last, point) => ((point.measures.subscribe?.count ?? 0) > 0 ? point.t : last), -1);
    return {
      ready: report.measures.subscribe?.count ?? 0,
      errors: errorsOf(report),
      errorKinds: report.errors,
      allReadyWithinSeconds: lastReady + 1,
      connectP99Ms: report.measures.connect?.p99 ?? NaN,
      subscribeP99Ms: report.measures.subscribe?.p99 ?? NaN,
      maxConnectPlusSubscribeMs: (report.measures.connect?.max ?? NaN) + (report.measures.subscribe?.max ?? NaN),
      serverPeakRssMb: report.server?.peakRssMb ?? NaN,
      generatorCpuSeconds: report.generatorCpuSeconds,
    };
  });
}

const { commit, command, header } = describeRun(`S6 capacity  ${connections} connections, held ${hold} s; storm of ${connections} in 1 s; ${values.processes} generator processes`, 's6.js');
console.log(header);
const idleRuns: IdleOutcome[] = [];
const stormRuns: StormOutcome[] = [];
let port = 4500;
for (let run = 1; run <= Number(values.runs); run++) {
  if (phases.includes('idle')) {
    process.stderr.write(`run ${run}: idle connections\n`);
    const o = await idle(port++);
    process.stderr.write(`  ${fmt(o.kbPerConnection)} KB per connection (${fmt(o.baselineRssMb, 0)} → ${fmt(o.heldRssMb, 0)} MB at ${o.sessions} sessions), ${o.held} held, ${o.errors} errors ${JSON.stringify(o.errorKinds)}\n`);
    idleRuns.push(o);
  }
  if (phases.includes('storm')) {
    process.stderr.write(`run ${run}: connection storm\n`);
    const o = await storm(port++);
    process.stderr.write(`  ${o.ready} ready within ${o.allReadyWithinSeconds} s, ${o.errors} errors ${JSON.stringify(o.errorKinds)}\n`);
    stormRuns.push(o);
  }
}
if (idleRuns.length) {
  const m = (pick: (o: IdleOutcome) => number) => median(idleRuns.map(pick));
  console.log('| idle connections | held (each run) | errors | RSS before MB | RSS held MB | KB per connection | target | generator CPU s |');
  console.log('|---|---|---|---|---|---|---|---|');
  console.log(
    `| ${connections} | ${idleRuns.map((o) => `${o.held} (${o.sessions} sessions)`).join(', ')} | ${idleRuns.reduce((a, o) => a + o.errors, 0)} | ${fmt(m((o) => o.baselineRssMb), 0)} | ${fmt(m((o) => o.heldRssMb), 0)} | ${fmt(m((o) => o.kbPerConnection))} | ≤ 16 KB: ${m((o) => o.kbPerConnection) <= 16 ? 'met' : 'not met'} | ${fmt(m((o) => o.generatorCpuSeconds))} |`,
  );
}
if (stormRuns.length) {
  const m = (pick: (o: StormOutcome) => number) => median(stormRuns.map(pick));
  console.log('| storm clients | ready (each run) | errors | all ready within s (each run) | connect p99 ms | subscribe p99 ms | server peak RSS MB | generator CPU s | target |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  const met = stormRuns.every((o) => o.ready === connections && o.errors === 0 && o.allReadyWithinSeconds < 10);
  console.log(
    `| ${connections} | ${stormRuns.map((o) => o.ready).join(', ')} | ${stormRuns.reduce((a, o) => a + o.errors, 0)} | ${stormRuns.map((o) => o.allReadyWithinSeconds).join(', ')} | ${fmt(m((o) => o.connectP99Ms))} | ${fmt(m((o) => o.subscribeP99Ms))} | ${fmt(m((o) => o.serverPeakRssMb), 0)} | ${fmt(m((o) => o.generatorCpuSeconds))} | all ready < 10 s, no errors: ${met ? 'met' : 'not met'} |`,
  );
}
mkdirSync(join(values.out!, '..'), { recursive: true });
writeFileSync(values.out!, JSON.stringify({ date: new Date().toISOString(), node: process.version, commit, command, connections, hold, idle: idleRuns, storm: stormRuns }, null, 2) + '\n');
console.log(`results written to ${values.out}`);
