/**
 * BENCHMARKS.md S4 (chat) on a MongoDB-wire server: Perseid with change-driven
 * live queries against Perseid with poll-and-diff, in one run. Reports server
 * CPU, database CPU and documents read from the database per second.
 *
 * Usage: node dist/bench/s4.js [--duration 180] [--database mongo-java-server|ferretdb]
 */
import { join } from 'node:path';
import { startService, type RunningService } from '../scripts/services/control.js';
import { describeRun, fmt, NEEDS, onCore, pinProcess, portFree, readReport, runGenerator, serverStats, spawnChild, stopOnInterrupt, stopProcess, waitForHttp, BENCH_SERVER_FLAGS, benchOptions, tempDir } from './harness.js';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { ProcessSampler } from '../src/load/process-sampler.js';
import type { LoadReport } from '../src/load/report/model.js';

const HELP = `S4 chat: change-driven live queries vs poll-and-diff, side by side, on a MongoDB-wire server.

Usage: s4 [options]
  --duration <s>      seconds of chatting per mode (default 180)
  --users <n>         users (default 50)
  --groups <n>        groups (default 25)
  --interval-ms <ms>  pause between one user's messages (default 2000)
  --database <name>   mongo-java-server (change streams) or ferretdb (oplog); default mongo-java-server
  --out <file>        JSON results (default bench/results/s4-<database>.json)

${NEEDS}
Starts a database of its own for each mode (scripts/services): mongo-java-server needs a JDK and
Maven to build it the first time, FerretDB needs Go. Ports from 4300 up must be free.`;

const values = benchOptions(HELP, {
  duration: { type: 'string', default: '180' },
  users: { type: 'string', default: '50' },
  groups: { type: 'string', default: '25' },
  'interval-ms': { type: 'string', default: '2000' },
  database: { type: 'string', default: 'mongo-java-server' },
  out: { type: 'string' },
});
const database = values.database as 'mongo-java-server' | 'ferretdb';
if (database !== 'mongo-java-server' && database !== 'ferretdb') {
  console.error(`unknown database ${database}\n\n${HELP}`);
  process.exit(2);
}
const changeSource = database === 'ferretdb' ? 'oplog' : 'change-stream';
const modes = [
  { name: 'change-driven', source: changeSource },
  { name: 'poll-and-diff', source: 'poll' },
] as const;

interface Outcome {
  mode: string;
  source: string;
  load: LoadReport;
  serverCpuSeconds: number;
  databaseCpuSeconds: number;
  documentsRead: number;
  seconds: number;
}

/** The database of the mode under way, stopped if the run is interrupted. */
let running: RunningService | undefined;
stopOnInterrupt([{ stop: async () => running?.stop() }]);

async function runMode(mode: (typeof modes)[number], port: number): Promise<Outcome> {
  // A fresh server per mode, so neither inherits the other's data or oplog.
  const db: RunningService = await startService(database);
  running = db;
  pinProcess(db.pid, 1);
  const env = {
    ...process.env,
    MONGO_URL: `${db.url}chat`,
    MONGO_OPLOG_URL: mode.source === 'oplog' ? `${db.url}local` : '',
    PERSEID_CHANGE_SOURCE: mode.source,
  };
  const [cmd, args] = onCore(0, ['dist/src/cli/main.js', 'start', 'dist/examples/chat/app.js', '--port', String(port), ...BENCH_SERVER_FLAGS]);
  await portFree(port);
  const server = spawnChild(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'], env });
  try {
    await waitForHttp(port, '/perseid/stats', server);
    const before = await serverStats(port);
    const dbSampler = new ProcessSampler(db.pid);
    const t0 = Date.now();
    const dir = tempDir('perseid-s4-');
    try {
      await runGenerator(
        onCore(1, [
          'dist/src/cli/main.js', 'load', 's4', '--url', `http://127.0.0.1:${port}`,
          '--concurrency', values.users!, '--duration', values.duration!,
          '--param', `groups=${values.groups}`, '--param', `interval=${values['interval-ms']}`,
          '--server-pid', String(server.pid), '--json', join(dir, 'report.json'),
        ]),
        server,
      );
      const load = readReport(join(dir, 'report.json'));
      const seconds = (Date.now() - t0) / 1000;
      const after = await serverStats(port);
      return {
        mode: mode.name,
        source: mode.source,
        load,
        serverCpuSeconds: load.server?.cpuSeconds ?? NaN,
        databaseCpuSeconds: dbSampler.stop().cpuSeconds,
        documentsRead: (after.perseid_database_documents_read_total ?? 0) - (before.perseid_database_documents_read_total ?? 0),
        seconds,
      };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  } finally {
    await stopProcess(server);
    await db.stop();
  }
}

const { commit, command, header } = describeRun(`S4 chat  ${values.users} users in ${values.groups} groups, a message every ${values['interval-ms']} ms each, ${values.duration} s per mode, on ${database}`, 's4.js');
console.log(header);
const outcomes: Outcome[] = [];
let port = 4300;
for (const mode of modes) {
  process.stderr.write(`mode ${mode.name} (${mode.source})\n`);
  outcomes.push(await runMode(mode, port++));
}
const [change, poll] = outcomes as [Outcome, Outcome];
const table = [
  '| mode | source | messages sent | errors | server CPU s | server CPU % | database CPU s | documents read | read / s | p50 ms | p99 ms |',
  '|---|---|---|---|---|---|---|---|---|---|---|',
  ...outcomes.map(
    (o) =>
      `| ${o.mode} | ${o.source} | ${o.load.measures.sendMessage?.count ?? 0} | ${o.load.users.failed + Object.values(o.load.errors).reduce((a, b) => a + b, 0)} | ${fmt(o.serverCpuSeconds, 2)} | ${fmt((100 * o.serverCpuSeconds) / o.seconds)} | ${fmt(o.databaseCpuSeconds, 2)} | ${o.documentsRead} | ${fmt(o.documentsRead / o.seconds)} | ${fmt(o.load.measures.sendMessage?.p50 ?? NaN)} | ${fmt(o.load.measures.sendMessage?.p99 ?? NaN)} |`,
  ),
];
console.log(table.join('\n'));
const ratio = (a: number, b: number) => (b > 0 ? a / b : Infinity);
console.log(
  `\npoll-and-diff / change-driven: documents read ${fmt(ratio(poll.documentsRead, change.documentsRead), 1)}×, server CPU ${fmt(ratio(poll.serverCpuSeconds, change.serverCpuSeconds), 1)}×, database CPU ${fmt(ratio(poll.databaseCpuSeconds, change.databaseCpuSeconds), 1)}×`,
);
// The whole run is the figure; its second half says what a server that has been up a while pays: the change-driven
// side's first minute is mostly V8 warming up, and poll-and-diff reads less until every group's 50-message window is full.
const secondHalf = (o: Outcome) => {
  const samples = o.load.server?.samples.filter((s) => s.t > Number(values.duration) / 2) ?? [];
  return samples.reduce((sum, s) => sum + s.cpuPercent, 0) / samples.length;
};
console.log(
  `second half of each run: change-driven ${fmt(secondHalf(change), 1)} %, poll-and-diff ${fmt(secondHalf(poll), 1)} % of a core (${fmt(ratio(secondHalf(poll), secondHalf(change)), 1)}×)`,
);
const outFile = values.out ?? join('bench', 'results', `s4-${database}.json`);
mkdirSync(join(outFile, '..'), { recursive: true });
writeFileSync(outFile, JSON.stringify({ date: new Date().toISOString(), node: process.version, commit, command, outcomes }, null, 2) + '\n');
console.log(`results written to ${outFile}`);
