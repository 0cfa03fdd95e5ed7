/**
 * BENCHMARKS.md S5 (scale-out): S3 and S1 against one process, two workers
 * (`--workers 2`), and two servers that both balance (clients spread over
 * both, or all through one that passes connections on); then fan-out over
 * Redis against a change source per server, as servers are added.
 *
 * This machine has two cores: every server process of a topology runs on core
 * 0 and the load on core 1. A topology's throughput on that one core, divided
 * by the single process's, is what each worker or server keeps of a process's
 * throughput once the cluster machinery (primary, IPC, balancing, fan-out) is
 * paid for: the "throughput per worker" of Cluster's benchmark, measured
 * without needing a core per worker.
 *
 * Usage: node dist/bench/s5.js [--parts s3,s1,fanout] [--runs 3]
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startService, type RunningService } from '../scripts/services/control.js';
import { cpuSeconds } from '../src/load/process-table.js';
import type { LoadReport } from '../src/load/report/model.js';
import { describeRun, fmt, NEEDS, onCore, pinProcess, portFree, readReport, runGenerator, serverStats, spawnChild, stopOnInterrupt, stopProcess, waitForHttp, BENCH_SERVER_FLAGS, benchOptions, tempDir } from './harness.js';
import { median } from './stats.js';

type Topology = 'one process' | '1 worker (primary on the load core)' | '2 workers' | '2 servers, clients spread' | '2 servers, one door';
const ALL_TOPOLOGIES: Topology[] = ['one process', '1 worker (primary on the load core)', '2 workers', '2 servers, clients spread', '2 servers, one door'];
const isWorkers = (t: Topology | number) => t === '2 workers' || t === '1 worker (primary on the load core)';

const HELP = `S5 scale-out: one process vs two workers vs two balancing servers (S3, S1), and Redis fan-out vs a change source per server.

Usage: s5 [options]
  --parts <list>      any of s3, s1, fanout (default all)
  --runs <n>          runs per topology; medians are reported (default 3)
  --s3-seconds <s>    length of each S3 run (default 30)
  --s1-seconds <s>    arrivals of each S1 run (default 40)
  --s1-rate <n>       S1 clients per second, 500 ms think time (default 12)
  --topologies <list> semicolon-separated, of: one process; 1 worker (primary on the load core);
                      2 workers; 2 servers, clients spread; 2 servers, one door
                      (default all; one process always runs, as the reference)
  --servers <list>    server counts of the fan-out series (default 1,2,3)
  --out <file>        JSON results (default bench/results/s5.json)

${NEEDS}
Starts a mongo-java-server (a JDK and Maven to build it the first time) and a Redis (redis-server)
of its own. Ports from 4500 up must be free.`;

const values = benchOptions(HELP, {
  parts: { type: 'string', default: 's3,s1,fanout' },
  runs: { type: 'string', default: '3' },
  's3-seconds': { type: 'string', default: '30' },
  's1-seconds': { type: 'string', default: '40' },
  's1-rate': { type: 'string', default: '12' },
  servers: { type: 'string', default: '1,2,3' },
  topologies: { type: 'string' },
  out: { type: 'string', default: join('bench', 'results', 's5.json') },
});
const parts = values.parts!.split(',');
const TOPOLOGIES: Topology[] = ['one process'];
for (const name of values.topologies?.split(';').map((t) => t.trim()) ?? ALL_TOPOLOGIES) {
  if (!ALL_TOPOLOGIES.includes(name as Topology)) {
    console.error(`unknown topology ${name}\n\n${HELP}`);
    process.exit(2);
  }
  if (!TOPOLOGIES.includes(name as Topology)) TOPOLOGIES.push(name as Topology);
}
for (const part of parts) {
  if (!['s3', 's1', 'fanout'].includes(part)) {
    console.error(`unknown part ${part}\n\n${HELP}`);
    process.exit(2);
  }
}


interface Deployment {
  urls: string[];
  /** Every server-side process: the one(s) that take connections first, then the rest. */
  front: number[];
  back: number[];
  ports: number[];
  stop(): Promise<void>;
}

let nextPort = 4500;

async function startServer(app: string, port: number, env: NodeJS.ProcessEnv, extra: string[] = []): Promise<ChildProcess> {
  await portFree(port);
  const [cmd, args] = onCore(0, ['dist/src/cli/main.js', 'start', app, '--port', String(port), ...BENCH_SERVER_FLAGS, ...extra]);
  return spawnChild(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, ...env } });
}

async function workerPids(port: number): Promise<number[]> {
  const stats = (await (await fetch(`http://127.0.0.1:${port}/perseid/stats`)).json()) as { workers?: Array<{ pid: number }> };
  return (stats.workers ?? []).map((w) => w.pid);
}

/** Starts `topology` for `app` on `mongoUrl`; servers of a cluster find each other (and fan out) through `redisUrl`. */
async function deploy(topology: Topology | number, app: string, env: NodeJS.ProcessEnv, fanout: 'redis' | 'redis, no relay' | 'off' = 'redis'): Promise<Deployment> {
  const children: ChildProcess[] = [];
  const stop = async () => {
    await Promise.all(children.map((c) => stopProcess(c)));
  };
  if (topology === 'one process' || isWorkers(topology)) {
    const port = nextPort++;
    const workers = topology === '2 workers' ? 2 : 1;
    const child = await startServer(app, port, { ...env, REDIS_URL: '' }, isWorkers(topology) ? ['--workers', String(workers)] : []);
    children.push(child);
    await waitForHttp(port, '/health', child, 60000);
    // Workers report in once a second; wait until all have.
    let back: number[] = [];
    while (isWorkers(topology) && (back = await workerPids(port)).length < workers) await new Promise((r) => setTimeout(r, 200));
    // The worker keeps core 0 to itself, as one process does: what it keeps of one process's throughput is then measured alone.
    if (topology === '1 worker (primary on the load core)') pinProcess(child.pid!, 1);
    return { urls: [`http://127.0.0.1:${port}`], front: [child.pid!], back, ports: [port], stop };
  }
  const count = typeof topology === 'number' ? topology : 2;
  const ports = Array.from({ length: count }, () => nextPort++);
  for (const port of ports) {
    const cluster = typeof topology === 'number' ? [] : ['--public-url', `http://127.0.0.1:${port}`, '--balancer', '--discovery-interval-ms', '500'];
    children.push(await startServer(app, port, { ...env, PERSEID_FANOUT: fanout === 'off' ? 'off' : 'redis', PERSEID_RELAY: fanout === 'redis' ? 'on' : 'off' }, cluster));
  }
  for (const [i, port] of ports.entries()) await waitForHttp(port, '/health', children[i]!, 60000);
  // Let every server see the others in the registry before clients arrive.
  await new Promise((r) => setTimeout(r, 1500));
  const urls = ports.map((p) => `http://127.0.0.1:${p}`);
  const pids = children.map((c) => c.pid!);
  return topology === '2 servers, one door'
    ? { urls: [urls[0]!], front: [pids[0]!], back: pids.slice(1), ports, stop }
    : { urls, front: pids, back: [], ports, stop };
}

interface Outcome {
  part: string;
  topology: string;
  run: number;
  report: LoadReport;
  /** CPU seconds during the run: of the processes clients connect to, of the others, of the database. */
  frontCpu: number;
  backCpu: number;
  databaseCpu: number;
  /** Per server: CPU seconds and counters' increase during the run. */
  perServer: Array<{ cpu: number; changesReceived: number; fanoutReceived: number; messagesSent: number }>;
}

async function measure(part: string, topology: string, run: number, deployment: Deployment, db: RunningService, load: string[]): Promise<Outcome> {
  const dir = tempDir('perseid-s5-');
  const pids = [...deployment.front, ...deployment.back];
  try {
    const cpu0 = pids.map(cpuSeconds);
    const db0 = cpuSeconds(db.pid);
    const stats0 = await Promise.all(deployment.ports.map(serverStats));
    await runGenerator(onCore(1, ['dist/src/cli/main.js', 'load', ...load, ...deployment.urls.flatMap((u) => ['--url', u]), '--json', join(dir, 'report.json')]));
    const cpu = pids.map((pid, i) => cpuSeconds(pid) - cpu0[i]!);
    const stats1 = await Promise.all(deployment.ports.map(serverStats));
    const delta = (i: number, name: string) => (stats1[i]![name] ?? 0) - (stats0[i]![name] ?? 0);
    const frontCount = deployment.front.length;
    return {
      part,
      topology,
      run,
      report: readReport(join(dir, 'report.json')),
      frontCpu: cpu.slice(0, frontCount).reduce((a, b) => a + b, 0),
      backCpu: cpu.slice(frontCount).reduce((a, b) => a + b, 0),
      databaseCpu: cpuSeconds(db.pid) - db0,
      // By port; meaningful where each port is one server process (the fan-out series).
      perServer: deployment.ports.map((_, i) => ({
        cpu: cpu[i] ?? NaN,
        changesReceived: delta(i, 'perseid_changes_received_total'),
        fanoutReceived: delta(i, 'perseid_fanout_received_total'),
        messagesSent: delta(i, 'perseid_messages_sent_total'),
      })),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const runs = Number(values.runs);
const { commit, command, header } = describeRun(`S5 scale-out  parts ${parts.join(', ')}  runs ${runs}  (all server processes on core 0)`, 's5.js');
console.log(header);
const outcomes: Outcome[] = [];
const out = values.out!;
const save = (extra: object = {}) => {
  mkdirSync(join(out, '..'), { recursive: true });
  writeFileSync(out, JSON.stringify({ date: new Date().toISOString(), node: process.version, commit, command, outcomes, ...extra }, null, 2) + '\n');
};

const mongo = await startService('mongo-java-server');
const redis = await startService('redis');
let current: Deployment | undefined;
stopOnInterrupt([{ stop: async () => current?.stop() }, mongo, redis]);
pinProcess(mongo.pid, 1);
pinProcess(redis.pid, 1);
const tables: string[] = [];
try {
  const scenarios = [
    {
      part: 's3',
      app: 'dist/bench/apps/pub-cycle.js',
      env: { PUB_CYCLE_KEEP_LIVE: '1' },
      load: ['s3', '--concurrency', '10', '--duration', values['s3-seconds']!, '--param', 'size=200kb'],
      rate: (r: LoadReport) => r.rates.subscriptionsPerMinute ?? NaN,
      unit: 'subs/min',
    },
    {
      part: 's1',
      app: 'dist/examples/tasks/app.js',
      env: {},
      load: ['s1', '--rate', values['s1-rate']!, '--duration', values['s1-seconds']!, '--think-ms', '500', '--client', 'lean'],
      rate: (r: LoadReport) => r.rates.operationsPerSecond,
      unit: 'ops/s',
    },
  ].filter((s) => parts.includes(s.part));

  for (const scenario of scenarios) {
    for (let run = 1; run <= runs; run++) {
      for (const topology of TOPOLOGIES) {
        process.stderr.write(`${scenario.part} run ${run}/${runs}: ${topology}\n`);
        const database = `s5_${scenario.part}_${run}_${topology.replace(/\W+/g, '_')}`;
        // Every write goes through Perseid here, so the servers share changes over Redis without a relay.
        const deployment = await deploy(topology, scenario.app, { ...scenario.env, MONGO_URL: `${mongo.url}${database}`, REDIS_URL: redis.url }, 'redis, no relay');
        current = deployment;
        try {
          outcomes.push(await measure(scenario.part, topology, run, deployment, mongo, scenario.load));
        } finally {
          await deployment.stop();
        }
        save();
      }
    }
    const rows = TOPOLOGIES.map((topology) => {
      const mine = outcomes.filter((o) => o.part === scenario.part && o.topology === topology);
      const m = (f: (o: Outcome) => number) => median(mine.map(f));
      const connections = (o: Outcome) => o.report.measures.connect?.count ?? NaN;
      const total = (o: Outcome) => o.frontCpu + o.backCpu;
      const rate = m((o) => scenario.rate(o.report));
      const p99 = m((o) => Math.max(...Object.entries(o.report.measures).filter(([n]) => n !== 'connect').map(([, s]) => s.p99)));
      const errors = m((o) => o.report.users.failed + o.report.users.aborted);
      const cpuPerOp = m((o) => total(o) / (scenario.rate(o.report) * o.report.seconds));
      const cpuPerConnection = m((o) => (1000 * total(o)) / connections(o));
      // The processes that serve sessions: the workers (not their primary), or every server.
      const serving = (o: Outcome) => (isWorkers(topology) ? o.backCpu : total(o));
      const servingCpuPerOp = m((o) => serving(o) / (scenario.rate(o.report) * o.report.seconds));
      return { topology, rate, p99, errors, cpu: m(total), cpuPerOp, servingCpuPerOp, cpuPerConnection, primaryPerConnection: m((o) => (1000 * o.frontCpu) / connections(o)) };
    });
    const one = rows[0]!;
    const spread = rows.find((r) => r.topology === '2 servers, clients spread');
    // What balancing costs per connection: the primary's whole CPU (it serves no session), or
    // what passing connections on through one server adds over clients spread by themselves.
    const balancing = (r: (typeof rows)[number]) =>
      isWorkers(r.topology) ? fmt(r.primaryPerConnection, 2) : r.topology === '2 servers, one door' && spread ? fmt(r.cpuPerConnection - spread.cpuPerConnection, 2) : '-';
    tables.push(
      [
        `S5 with ${scenario.part.toUpperCase()} (${scenario.load.join(' ')}), every server process on one core`,
        '',
        `| topology | ${scenario.unit} | × one process | CPU s (all server processes) | CPU per op × one process | each worker or server keeps, of one process | p99 ms | failed | primary or door CPU ms per connection |`,
        '|---|---|---|---|---|---|---|---|---|',
        ...rows.map(
          (r) =>
            `| ${r.topology} | ${fmt(r.rate, 0)} | ${fmt(r.rate / one.rate, 2)} | ${fmt(r.cpu, 2)} | ${fmt(r.cpuPerOp / one.cpuPerOp, 2)} | ${fmt(one.servingCpuPerOp / r.servingCpuPerOp, 2)} | ${fmt(r.p99)} | ${r.errors} | ${balancing(r)} |`,
        ),
      ].join('\n'),
    );
    console.log(`\n${tables.at(-1)}`);
    save({ tables });
  }

  if (parts.includes('fanout')) {
    const counts = values.servers!.split(',').map(Number);
    const series: string[] = [];
    const modes = { off: 'change source per server', redis: 'Redis fan-out + relay', 'redis, no relay': 'Redis fan-out, no relay' } as const;
    for (const fanout of Object.keys(modes) as Array<keyof typeof modes>) {
      for (const n of counts) {
        const mode = modes[fanout];
        process.stderr.write(`fan-out series: ${n} server(s), ${mode}\n`);
        const database = `s5_fanout_${fanout.replace(/\W+/g, '_')}_${n}`;
        const deployment = await deploy(n, 'dist/examples/tasks/app.js', { MONGO_URL: `${mongo.url}${database}`, REDIS_URL: redis.url }, fanout);
        current = deployment;
        try {
          // The same total load, spread over the servers.
          const o = await measure('fanout', `${n} × ${mode}`, 1, deployment, mongo, ['s1', '--rate', '8', '--duration', values['s1-seconds']!, '--think-ms', '500', '--client', 'lean']);
          outcomes.push(o);
          const per = (f: (s: Outcome['perServer'][number]) => number) => median(o.perServer.map(f));
          series.push(
            `| ${n} | ${mode} | ${fmt(per((s) => s.cpu), 2)} | ${fmt(per((s) => s.changesReceived), 0)} | ${fmt(per((s) => s.fanoutReceived), 0)} | ${fmt(per((s) => s.messagesSent), 0)} | ${fmt(o.databaseCpu, 2)} | ${o.report.users.failed + o.report.users.aborted} |`,
          );
        } finally {
          await deployment.stop();
        }
        save({ tables });
      }
    }
    tables.push(
      [
        'Fan-out as servers are added (S1 at 8 clients/s, 500 ms think, users spread over the servers)',
        '',
        '| servers | changes reach each server by | CPU s per server | changes received per server | Redis messages received (own echoes included) | DDP messages sent per server | database CPU s | failed |',
        '|---|---|---|---|---|---|---|---|',
        ...series,
      ].join('\n'),
    );
    console.log(`\n${tables.at(-1)}`);
  }
} finally {
  await redis.stop();
  await mongo.stop();
}
save({ tables });
console.log(`\nresults written to ${out}`);
