/**
 * What the APM costs: S1 (the tasks app, 48 users/s, 500 ms think time) against
 * Perseid with the APM off (PERSEID_APM=off) and on, alternating in the same
 * run, the server pinned to core 0 and `perseid load` to core 1 (the suite's
 * harness). Reports the server CPU per delivered message and the p99 of each,
 * and the ratio on/off. Target (issue #12): at most 5 % more CPU per message,
 * p99 unchanged beyond noise. Run it on a quiet machine.
 *
 * Usage: node dist/bench/apm-overhead.js [--runs 3] [--duration 60] [--rate 48] [--out bench/results/apm-overhead.json]
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describeRun, fmt, NEEDS, onCore, portFree, readReport, runGenerator, serverStats, spawnChild, stopProcess, waitForHttp, BENCH_SERVER_FLAGS, benchOptions, tempDir } from './harness.js';
import { median } from './stats.js';

const HELP = `The APM's cost: S1 with 500 ms think time, APM off and on, alternating in one run.

Usage: apm-overhead [options]
  --runs <n>        runs per setting; medians are reported (default 3)
  --duration <s>    seconds of arrivals per run (default 60)
  --rate <users/s>  arrival rate (default 48)
  --out <file>      JSON results (default bench/results/apm-overhead.json)

${NEEDS}
No database: Perseid runs on its embedded store. Ports from 4700 up must be free.`;

const values = benchOptions(HELP, {
  runs: { type: 'string', default: '3' },
  duration: { type: 'string', default: '60' },
  rate: { type: 'string', default: '48' },
  out: { type: 'string', default: join('bench', 'results', 'apm-overhead.json') },
});

interface Outcome {
  apm: 'off' | 'on';
  cpuSeconds: number;
  messagesSent: number;
  usPerMessage: number;
  p99: number;
  p50: number;
  completed: string;
  failed: number;
}

async function run(apm: 'off' | 'on', port: number): Promise<Outcome> {
  const dataDir = tempDir('perseid-apm-overhead-');
  const jsonFile = join(dataDir, 'report.json');
  const [cmd, args] = onCore(0, ['dist/src/cli/main.js', 'start', 'dist/examples/tasks/app.js', '--port', String(port), '--data-dir', join(dataDir, 'data'), ...BENCH_SERVER_FLAGS]);
  await portFree(port);
  const server = spawnChild(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, PERSEID_APM: apm } });
  try {
    await waitForHttp(port, '/perseid/stats', server, 30000);
    await runGenerator(
      onCore(1, ['dist/src/cli/main.js', 'load', 's1', '--url', `http://127.0.0.1:${port}`, '--rate', values.rate!, '--duration', values.duration!, '--think-ms', '500', '--server-pid', String(server.pid), '--json', jsonFile]),
      server,
    );
    const stats = await serverStats(port);
    const report = readReport(jsonFile);
    const measures = Object.entries(report.measures).filter(([name]) => name !== 'connect');
    const cpuSeconds = report.server?.cpuSeconds ?? NaN;
    const messagesSent = stats.perseid_messages_sent_total ?? NaN;
    return {
      apm,
      cpuSeconds,
      messagesSent,
      usPerMessage: (1e6 * cpuSeconds) / messagesSent,
      p99: Math.max(...measures.map(([, s]) => s.p99)),
      p50: Math.max(...measures.map(([, s]) => s.p50)),
      completed: `${report.users.completed}/${report.users.planned}`,
      failed: report.users.failed + report.users.aborted,
    };
  } finally {
    await stopProcess(server);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const runs = Number(values.runs);
const { commit, command, header } = describeRun(`APM overhead  S1 ${values.rate}/s, 500 ms think, ${values.duration} s  runs ${runs}`, 'apm-overhead.js');
console.log(header);
const outcomes: Outcome[] = [];
let port = 4700;
for (let i = 1; i <= runs; i++) {
  // Alternating, so a drift of the machine over the run weighs on both alike.
  for (const apm of i % 2 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
    process.stderr.write(`run ${i}/${runs}: APM ${apm}\n`);
    outcomes.push(await run(apm, port++));
  }
}
const summary = (apm: 'off' | 'on') => {
  const mine = outcomes.filter((o) => o.apm === apm);
  return {
    usPerMessage: median(mine.map((o) => o.usPerMessage)),
    cpuSeconds: median(mine.map((o) => o.cpuSeconds)),
    p50: median(mine.map((o) => o.p50)),
    p99: median(mine.map((o) => o.p99)),
    failed: mine.reduce((n, o) => n + o.failed, 0),
    completed: mine.map((o) => o.completed).join(', '),
  };
};
const off = summary('off');
const on = summary('on');
const cpuRatio = on.usPerMessage / off.usPerMessage;
console.log(
  [
    '| APM | users done | failed | server CPU s | µs CPU / message | p50 ms | p99 ms |',
    '|---|---|---|---|---|---|---|',
    `| off | ${off.completed} | ${off.failed} | ${fmt(off.cpuSeconds, 2)} | ${fmt(off.usPerMessage, 2)} | ${fmt(off.p50)} | ${fmt(off.p99)} |`,
    `| on | ${on.completed} | ${on.failed} | ${fmt(on.cpuSeconds, 2)} | ${fmt(on.usPerMessage, 2)} | ${fmt(on.p50)} | ${fmt(on.p99)} |`,
    '',
    `CPU per delivered message, on / off: ${fmt(cpuRatio, 3)} (${fmt((cpuRatio - 1) * 100)} %; target <= 5 %)`,
    `p99, on / off: ${fmt(on.p99 / off.p99, 2)}`,
  ].join('\n'),
);
mkdirSync(join(values.out!, '..'), { recursive: true });
writeFileSync(values.out!, JSON.stringify({ date: new Date().toISOString(), node: process.version, commit, command, outcomes, off, on, cpuRatio }, null, 2) + '\n');
console.log(`\nresults written to ${values.out}`);
