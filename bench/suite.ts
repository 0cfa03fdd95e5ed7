/**
 * The benchmark suite of BENCHMARKS.md: each scenario against Perseid and the
 * bare-`ws` limit baselines in the same run, the server pinned to core 0 and
 * `perseid load` to core 1, every case --runs times; medians and ratios against
 * the fast baseline go to a JSON file and a Markdown table.
 *
 * Usage: node dist/bench/suite.js [--cases s1-think,s1,s2,s3-20kb,s3-200kb,s3-200kb-live] [--runs 3] [--ladder 32,48,64]
 *        [--targets perseid,fast] [--load-extra="--processes 2"]
 * Run it with another Node (`/path/to/node dist/bench/suite.js`) and every
 * server and generator runs on that Node.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LoadReport } from '../src/load/report/model.js';
import { describeRun, fmt, NEEDS, onCore, portFree, readReport, runGenerator, serverStats, spawnChild, stopProcess, waitForHttp, BENCH_SERVER_FLAGS, benchOptions, tempDir } from './harness.js';
import { median } from './stats.js';

interface Case {
  /** perseid load arguments after the scenario name. */
  load: string[];
  scenario: string;
  /** The app Perseid runs for it. */
  app: string;
  targets: string[];
  /** Keep one idle subscriber so the query stays live between subscriptions (S3's cached variant). */
  keepLive?: string[];
}

const ALL_TARGETS = ['perseid', 'fast', 'naive'];
const CASES: Record<string, Case> = {
  's1-think': { scenario: 's1', load: ['--rate', '48', '--duration', '60', '--think-ms', '500'], app: 'dist/examples/tasks/app.js', targets: ALL_TARGETS },
  s1: { scenario: 's1', load: ['--rate', '8', '--duration', '60'], app: 'dist/examples/tasks/app.js', targets: ALL_TARGETS },
  s2: { scenario: 's2', load: ['--rate', '8', '--duration', '60', '--param', 'tasks=10'], app: 'dist/examples/tasks/app.js', targets: ['perseid', 'fast'] },
  's3-20kb': { scenario: 's3', load: ['--concurrency', '10', '--duration', '30', '--param', 'size=20kb'], app: 'dist/bench/apps/pub-cycle.js', targets: ALL_TARGETS },
  's3-200kb': { scenario: 's3', load: ['--concurrency', '10', '--duration', '30', '--param', 'size=200kb'], app: 'dist/bench/apps/pub-cycle.js', targets: ALL_TARGETS },
  's3-200kb-live': {
    scenario: 's3',
    load: ['--concurrency', '10', '--duration', '30', '--param', 'size=200kb'],
    app: 'dist/bench/apps/pub-cycle.js',
    targets: ['perseid'],
    keepLive: ['items', '200kb'],
  },
};

const HELP = `The benchmark suite: Perseid against the limit baseline, per scenario, in one run.

Usage: suite [options]
  --cases <list>   any of ${Object.keys(CASES).join(', ')} (default all)
  --runs <n>       runs per case and target; medians are reported (default 3)
  --ladder <list>  also run S1 with 500 ms think time at these rates (clients/s), once each,
                   and report the highest rate held (every client done, no error, p99 < 1 s)
  --targets <list> servers to run, of perseid, fast, naive (default all each case has)
  --load-extra=<args>  more perseid load arguments for every run, e.g. --load-extra="--processes 2"
                   (a second generator setting, so a figure does not hang on one client's timing)
  --port <n>       the first server's port; each run takes the next (default 4400)
  --out <file>     JSON results (default bench/results/suite.json)

${NEEDS}
No database: Perseid runs on its embedded store. Ports from --port up must be free.`;

const values = benchOptions(HELP, {
  cases: { type: 'string', default: Object.keys(CASES).join(',') },
  runs: { type: 'string', default: '3' },
  ladder: { type: 'string' },
  targets: { type: 'string' },
  'load-extra': { type: 'string', default: '' },
  port: { type: 'string', default: '4400' },
  out: { type: 'string', default: join('bench', 'results', 'suite.json') },
});
const cases = values.cases!.split(',');
const targetsWanted = values.targets?.split(',');
const loadExtra = values['load-extra']!.split(' ').filter(Boolean);
const targetsOf = (name: string) => CASES[name]!.targets.filter((t) => !targetsWanted || targetsWanted.includes(t));
for (const name of cases) {
  if (!CASES[name]) {
    console.error(`unknown case ${name}\n\n${HELP}`);
    process.exit(2);
  }
}

function serverCommand(target: string, app: string, port: number, dataDir: string): string[] {
  if (target === 'perseid') return ['dist/src/cli/main.js', 'start', app, '--port', String(port), '--data-dir', dataDir, ...BENCH_SERVER_FLAGS];
  return ['dist/bench/baseline-server.js', '--port', String(port), '--mode', target];
}

interface Outcome {
  caseName: string;
  target: string;
  report: LoadReport;
  messagesSent: number;
}

async function runCase(caseName: string, spec: Case, target: string, port: number, loadArgs = spec.load): Promise<Outcome> {
  const dataDir = tempDir('perseid-suite-');
  const jsonFile = join(dataDir, 'report.json');
  const [cmd, args] = onCore(0, serverCommand(target, spec.app, port, dataDir));
  await portFree(port);
  const server = spawnChild(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  let keeper: ReturnType<typeof spawnChild> | undefined;
  try {
    await waitForHttp(port, '/perseid/stats', server, 30000);
    if (spec.keepLive) {
      // One idle subscriber (a separate process, on the load core) holds the query live.
      keeper = spawnChild(...onCore(1, ['dist/src/cli/main.js', 'load', 's6', '--url', `http://127.0.0.1:${port}`, '--rate', '1', '--duration', '1', '--param', `publication=${spec.keepLive[0]}`, '--param', 'hold=100000', '--grace', '100000']), { stdio: 'ignore' });
      await new Promise((r) => setTimeout(r, 2000));
    }
    await runGenerator(onCore(1, ['dist/src/cli/main.js', 'load', spec.scenario, '--url', `http://127.0.0.1:${port}`, ...loadArgs, ...loadExtra, '--server-pid', String(server.pid), '--json', jsonFile]), server);
    const stats = await serverStats(port);
    return { caseName, target, report: readReport(jsonFile), messagesSent: stats.perseid_messages_sent_total ?? NaN };
  } finally {
    keeper?.kill('SIGTERM');
    await stopProcess(server);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

interface Row {
  caseName: string;
  target: string;
  completed: string;
  errors: number;
  cpuSeconds: number;
  cpuPercent: number;
  rssMb: number;
  p50: number;
  p99: number;
  rate: string;
  usPerMessage: number;
  generatorCpu: number;
}

function mainMeasure(report: LoadReport): string {
  return Object.keys(report.measures).find((n) => n !== 'connect' && n !== 'subscribe') ?? 'subscribe';
}

function row(caseName: string, target: string, outcomes: Outcome[]): Row {
  const m = (f: (o: Outcome) => number) => median(outcomes.map(f));
  const measure = mainMeasure(outcomes[0]!.report);
  const errors = (o: Outcome) => o.report.users.failed + o.report.users.aborted;
  const subs = outcomes[0]!.report.rates.subscriptionsPerMinute;
  return {
    caseName,
    target,
    // A fixed-concurrency case repeats the scenario: its count is of runs, not of users.
    completed:
      outcomes[0]!.report.shape.concurrency !== undefined
        ? `${m((o) => o.report.users.completed)} runs`
        : `${m((o) => o.report.users.completed)}/${outcomes[0]!.report.users.planned}`,
    errors: m(errors),
    cpuSeconds: m((o) => o.report.server?.cpuSeconds ?? NaN),
    cpuPercent: m((o) => o.report.server?.cpuPercent ?? NaN),
    rssMb: m((o) => o.report.server?.peakRssMb ?? NaN),
    p50: m((o) => o.report.measures[measure]?.p50 ?? NaN),
    p99: m((o) => o.report.measures[measure]?.p99 ?? NaN),
    rate: subs === undefined ? `${fmt(m((o) => o.report.rates.operationsPerSecond))} op/s` : `${fmt(m((o) => o.report.rates.subscriptionsPerMinute ?? NaN), 0)} sub/min`,
    usPerMessage: m((o) => (1e6 * (o.report.server?.cpuSeconds ?? NaN)) / o.messagesSent),
    generatorCpu: m((o) => o.report.generatorCpuSeconds),
  };
}

const runs = Number(values.runs);
const { commit, command, header } = describeRun(`Benchmark suite  cases ${cases.join(', ')}  runs ${runs}`, 'suite.js');
console.log(header);
const outcomes: Outcome[] = [];
const save = (extra: object = {}) => {
  mkdirSync(join(values.out!, '..'), { recursive: true });
  writeFileSync(values.out!, JSON.stringify({ date: new Date().toISOString(), node: process.version, commit, command, outcomes, ...extra }, null, 2) + '\n');
};
let port = Number(values.port);
for (let run = 1; run <= runs; run++) {
  for (const caseName of cases) {
    for (const target of targetsOf(caseName)) {
      process.stderr.write(`run ${run}/${runs}: ${caseName} on ${target}\n`);
      outcomes.push(await runCase(caseName, CASES[caseName]!, target, port++));
      save();
    }
  }
}

const rows: Row[] = [];
for (const caseName of cases) for (const target of targetsOf(caseName)) rows.push(row(caseName, target, outcomes.filter((o) => o.caseName === caseName && o.target === target)));
const table = [
  '| case | server | completed | failed | server CPU s | CPU % | peak RSS MB | p50 ms | p99 ms | rate | µs CPU / message | CPU × fast |',
  '|---|---|---|---|---|---|---|---|---|---|---|---|',
  ...rows.map((r) => {
    const fast = rows.find((x) => x.caseName === r.caseName && x.target === 'fast');
    return `| ${r.caseName} | ${r.target} | ${r.completed} | ${r.errors} | ${fmt(r.cpuSeconds, 2)} | ${fmt(r.cpuPercent)} | ${fmt(r.rssMb, 0)} | ${fmt(r.p50)} | ${fmt(r.p99)} | ${r.rate} | ${fmt(r.usPerMessage, 2)} | ${fast ? fmt(r.cpuSeconds / fast.cpuSeconds, 2) : '-'} |`;
  }),
];
console.log(table.join('\n'));

const ladder: Array<{ rate: number; target: string; held: boolean; p99: number; completed: string; cpuPercent: number }> = [];
if (values.ladder) {
  for (const rate of values.ladder.split(',').map(Number)) {
    for (const target of ['perseid', 'fast']) {
      process.stderr.write(`ladder: S1 with 500 ms think time at ${rate}/s on ${target}\n`);
      const o = await runCase(`s1-ladder-${rate}`, CASES['s1-think']!, target, port++, ['--rate', String(rate), '--duration', '60', '--think-ms', '500']);
      const r = o.report;
      const p99 = Math.max(...Object.entries(r.measures).filter(([n]) => n !== 'connect').map(([, s]) => s.p99));
      ladder.push({ rate, target, held: r.users.completed === r.users.planned && p99 < 1000, p99, completed: `${r.users.completed}/${r.users.planned}`, cpuPercent: r.server?.cpuPercent ?? NaN });
      save({ rows, ladder });
    }
  }
  console.log(['', '| S1, 500 ms think: rate | server | users done | p99 ms | CPU % | held |', '|---|---|---|---|---|---|', ...ladder.map((l) => `| ${l.rate}/s | ${l.target} | ${l.completed} | ${fmt(l.p99)} | ${fmt(l.cpuPercent)} | ${l.held ? 'yes' : 'no'} |`)].join('\n'));
}
save({ rows, ladder });
console.log(`\nresults written to ${values.out}`);
