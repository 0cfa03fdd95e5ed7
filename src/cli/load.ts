/** `perseid load`: the DDP load tester. */
import { accessSync, constants, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { compareReports, compareText, differenceText, setupDifferences, verdict } from '../load/report/compare.js';
import { htmlReport } from '../load/report/html.js';
import type { LoadReport } from '../load/report/model.js';
import { summaryText } from '../load/report/summary.js';
import { LoadSetupError, planRun, runScenario, type LoadSettings } from '../load/run-scenario.js';
import type { Phase } from '../load/scenario.js';
import { BUILT_IN } from '../load/scenarios/index.js';
import { enableTypeScript, TYPESCRIPT_FILE } from './typescript.js';
import { integerOption, numberOption, onePositional, UsageError, type CommandSpec, type Parsed } from './args.js';

export const loadCommand: CommandSpec = {
  takesArguments: true,
  name: 'load',
  summary: 'Load-test a DDP server (Perseid, Meteor, any) with scripted clients; report latencies, rates and server CPU/RAM.',
  usage: 'perseid load <s1|s2|s3|s4|s6|./script.js> --url <server> [options]',
  example: 'perseid load s1 --url http://127.0.0.1:3000 --rate 5 --duration 30',
  options: {
    url: {
      type: 'string',
      short: 'u',
      multiple: true,
      value: '<url>',
      help: 'Server to load: http(s)://host:port or ws(s)://host:port/websocket; the only host it connects to (repeat to spread users over several)',
    },
    rate: { type: 'string', short: 'r', value: '<users/s>', help: 'Users arriving per second (each runs the scenario once)' },
    duration: { type: 'string', short: 'd', value: '<s>', help: 'Seconds of arrivals, or of a fixed-concurrency run' },
    'ramp-to': { type: 'string', value: '<users/s>', help: 'Arrival rate at the end of --duration (a linear ramp)' },
    phase: { type: 'string', multiple: true, value: '<s>:<rate>[:<to>]', help: 'An arrival phase; repeat for several (instead of --rate/--duration)' },
    concurrency: { type: 'string', short: 'c', value: '<n>', help: 'Fixed concurrency: n users, each running the scenario again and again' },
    iterations: { type: 'string', value: '<n>', help: 'With --concurrency: scenario runs per user (default: until --duration ends)' },
    'think-ms': { type: 'string', value: '<ms>', help: 'Pause between a user\'s actions (default 0)' },
    client: { type: 'string', value: '<lean|full>', help: 'lean: decodes only what it waits for (built-in scenarios); full: the DDP client with local collections' },
    param: { type: 'string', short: 'p', multiple: true, value: '<key=value>', help: 'A scenario setting (e.g. tasks=20, size=20kb); repeat for several' },
    'timeout-ms': { type: 'string', value: '<ms>', help: 'Longest a single wait may take (default 30000)' },
    'max-users': { type: 'string', value: '<n>', help: 'Refuse a run that would start more users (default 20000)' },
    grace: { type: 'string', value: '<s>', help: 'How long users may run after the last one started before they are stopped (default 60)' },
    processes: { type: 'string', value: '<n>', help: 'Spread the users over n generator processes (user k in process k mod n) and merge what they measure, when one core cannot drive the load (default 1)' },
    'server-pid': { type: 'string', value: '<pid>', help: 'Sample the CPU and memory of this process and every process under it (Linux /proc)' },
    spawn: { type: 'string', value: '<command>', help: 'Start the server with this command in a process group of its own, sample it like --server-pid, stop the group afterwards' },
    json: { type: 'string', value: '<file>', help: 'Write the full report as JSON' },
    html: { type: 'string', value: '<file>', help: 'Write a self-contained HTML report with charts' },
    compare: { type: 'string', value: '<report.json>', help: 'Print how every figure changed against an earlier --json report of the same load (refused if the scenario, client, params, think time, rate or concurrency differ)' },
    threshold: { type: 'string', value: '<percent>', help: 'With --compare: exit 1 if any figure got this much worse (default 10); a percentile with fewer than 10 timings beyond it is not counted' },
    'threshold-ms': { type: 'string', value: '<ms>', help: 'With --compare: a latency that moved less than this is not counted, whatever the percent (default 1; 0 counts every change)' },
  },
  details: [
    'Built-in scenarios (BENCHMARKS.md), for the apps they were written for: s1, s2 and s6 the tasks example (npm start in a',
    'checkout of Perseid), s4 the chat example; another app needs a script of its own (docs/load-testing.md):',
    ...Object.entries(BUILT_IN).map(([name, m]) => `  ${name}  ${m.options?.description ?? ''}`),
    '',
    'A script is a module whose default export runs one simulated user:',
    '',
    '  export default async function (client, ctx) {',
    "    await client.subscribe('fetchTasks');",
    "    await ctx.measure('insert', () => client.call('insertTask', { description: 'x', sessionId: 'y' }));",
    '    await ctx.think();',
    '  }',
    "  export const options = { client: 'full', phases: [{ duration: 30, arrivalRate: 5 }] };",
    '',
    'client: call, apply, subscribe, expect(added|removed, collection, id, action), collection(name) (full client).',
    'ctx: measure(name, fn), sleep(ms), think(), count(name), params, vu, running.',
    '--compare against a run that differs only in --duration compares latencies, failures and CPU per operation, not the rates or peak memory.',
    'Ctrl-C stops the users and still writes the reports, marked interrupted; a second one quits at once.',
    'Exit status: 0 done; 1 no user completed, a generator process of --processes died before reporting, or --compare found a figure worse than --threshold; 2 bad usage, unreachable server, or a --compare baseline of another load; ended by SIGINT after a Ctrl-C.',
  ].join('\n'),
};

function phaseOption(text: string): Phase {
  const parts = text.split(':').map(Number);
  const [duration, arrivalRate, rampTo] = parts;
  if (parts.length < 2 || parts.length > 3 || parts.some((n) => !Number.isFinite(n) || n < 0) || !duration || arrivalRate === undefined) {
    throw new UsageError(`--phase must be <seconds>:<rate>[:<rate at the end>] (got ${text})`);
  }
  return rampTo === undefined ? { duration, arrivalRate } : { duration, arrivalRate, rampTo };
}

function settingsFrom(parsed: Parsed): LoadSettings {
  const { values } = parsed;
  const scenario = onePositional(parsed, `Missing the scenario: one of ${Object.keys(BUILT_IN).join(', ')}, or a script path`, 'scenario');
  const urls = (values.url as string[] | undefined) ?? [];
  if (urls.length === 0) throw new UsageError('Missing --url <server>');
  for (const url of urls) {
    try {
      const u = new URL(url.includes('://') ? url : `http://${url}`);
      if (!/^(https?|wss?):$/.test(u.protocol)) throw new Error('protocol');
    } catch {
      throw new UsageError(`--url must be an http(s) or ws(s) URL (got ${url})`);
    }
  }
  const settings: LoadSettings = { url: urls.length === 1 ? urls[0]! : urls, scenario, command: `perseid load ${process.argv.slice(3).join(' ')}` };
  const client = values.client;
  if (client !== undefined && client !== 'lean' && client !== 'full') throw new UsageError('--client must be lean or full');
  if (client) settings.client = client;
  const rate = numberOption(values, 'rate', 0.001, 100000);
  const duration = numberOption(values, 'duration', 0.001, 86400);
  const rampTo = numberOption(values, 'ramp-to', 0, 100000);
  const concurrency = integerOption(values, 'concurrency', 1, 100000);
  const phases = values.phase as string[] | undefined;
  if (concurrency !== undefined && (rate !== undefined || phases)) throw new UsageError('--concurrency cannot be combined with --rate or --phase');
  if (phases && rate !== undefined) throw new UsageError('use either --phase or --rate/--duration');
  if (phases) settings.phases = phases.map(phaseOption);
  else if (rate !== undefined || rampTo !== undefined) {
    settings.phases = [{ duration: duration ?? 60, arrivalRate: rate ?? 1, ...(rampTo !== undefined ? { rampTo } : {}) }];
  } else if (duration !== undefined && concurrency === undefined) {
    settings.duration = duration; // applies to whichever shape the scenario has by default
  }
  if (concurrency !== undefined) {
    settings.concurrency = concurrency;
    if (duration !== undefined) settings.duration = duration;
  }
  settings.iterations = integerOption(values, 'iterations', 1, 1e9);
  settings.thinkMs = integerOption(values, 'think-ms', 0, 3600000);
  settings.timeoutMs = integerOption(values, 'timeout-ms', 1, 3600000);
  settings.maxUsers = integerOption(values, 'max-users', 1, 10000000);
  settings.graceSeconds = numberOption(values, 'grace', 0, 86400);
  settings.serverPid = integerOption(values, 'server-pid', 1, 2 ** 31);
  settings.processes = integerOption(values, 'processes', 1, 256);
  settings.generatorEntry = new URL('./load-generator.js', import.meta.url);
  if (typeof values.spawn === 'string') settings.spawnServer = values.spawn;
  if (settings.serverPid !== undefined && settings.spawnServer) throw new UsageError('--server-pid and --spawn exclude each other');
  if ((settings.serverPid !== undefined || settings.spawnServer) && process.platform !== 'linux') {
    throw new UsageError(`--server-pid and --spawn read the server's figures from Linux's /proc, which ${process.platform} has not: run without them, or on Linux`);
  }
  const params: Record<string, string> = {};
  for (const entry of (values.param as string[] | undefined) ?? []) {
    const eq = entry.indexOf('=');
    if (eq < 1) throw new UsageError(`--param must be key=value (got ${entry})`);
    params[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  settings.params = params;
  return settings;
}

function readBaseline(file: string): LoadReport {
  let report: Partial<LoadReport>;
  try {
    report = JSON.parse(readFileSync(file, 'utf8')) as Partial<LoadReport>;
  } catch (error) {
    throw new UsageError(`cannot read --compare ${file}: ${(error as Error).message}`);
  }
  if (report.tool !== 'perseid load' || !report.measures || !report.shape || !report.scenario) throw new UsageError(`--compare ${file} is not a report written by perseid load --json`);
  return report as LoadReport;
}

/** A --json or --html file that cannot be written is refused before the run, not after minutes of it. */
function checkOutput(option: string, file: unknown): void {
  if (typeof file !== 'string') return;
  const folder = dirname(resolve(file));
  try {
    accessSync(folder, constants.W_OK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new UsageError(`cannot write --${option} ${file}: ${code === 'ENOENT' ? `no folder ${folder}` : `the folder ${folder} is not writable (${code})`}`);
  }
  if (statSync(file, { throwIfNoEntry: false })?.isDirectory()) throw new UsageError(`--${option} ${file} is a folder: give a file name`);
}

/** Setup mistakes (a scenario that does not load, an unreachable server, too many users) are usage errors: one line, exit 2. */
async function asUsage<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof LoadSetupError) throw new UsageError(error.message);
    if (error instanceof Error && /would start|start no user/.test(error.message)) throw new UsageError(error.message);
    throw error;
  }
}

/** Runs the command; resolves with the exit status. */
export async function runLoadCommand(parsed: Parsed): Promise<number> {
  const settings = settingsFrom(parsed);
  checkOutput('json', parsed.values.json);
  checkOutput('html', parsed.values.html);
  if (TYPESCRIPT_FILE.test(settings.scenario)) await enableTypeScript(); // a scenario in TypeScript runs as written
  const judging = { percent: numberOption(parsed.values, 'threshold', 0, 1e6) ?? 10, floorMs: numberOption(parsed.values, 'threshold-ms', 0, 1e6) ?? 1 };
  const compare = parsed.values.compare;
  const baseline = typeof compare === 'string' ? readBaseline(compare) : undefined;
  if (baseline) {
    // Before the run, not after minutes of it.
    const plan = await asUsage(() => planRun(settings));
    const blocking = setupDifferences(baseline, plan).filter((d) => d.blocks);
    if (blocking.length) throw new UsageError(`--compare ${compare as string} ran a different load (${blocking.map(differenceText).join('; ')}): run with the baseline's settings, or leave out --compare`);
  }
  // A live line on a terminal; a line every 10 s in a log.
  const tty = process.stderr.isTTY;
  settings.onProgress = (line, { seconds, final }) => {
    if (tty) process.stderr.write(`\r${line}\u001b[K${final ? '\n' : ''}`);
    else if (final || Math.round(seconds) % 10 === 0) process.stderr.write(`${line}\n`);
  };
  // Ctrl-C stops the users and reports what they measured; a second one ends at once.
  const interrupt = new AbortController();
  let interruptedBy: NodeJS.Signals | undefined;
  const onInterrupt = (signal: NodeJS.Signals) => {
    if (interruptedBy) process.exit(130);
    interruptedBy = signal;
    process.stderr.write(`\n${signal}: stopping the users for a report of what they measured (again to quit at once)\n`);
    interrupt.abort();
  };
  process.on('SIGINT', onInterrupt);
  settings.signal = interrupt.signal;
  let report: LoadReport;
  try {
    report = await asUsage(() => runScenario(settings));
  } finally {
    process.off('SIGINT', onInterrupt);
  }
  process.stdout.write(summaryText(report) + '\n');
  if (typeof parsed.values.json === 'string') {
    writeFileSync(parsed.values.json, JSON.stringify(report, null, 2) + '\n');
    process.stdout.write(`report written to ${parsed.values.json}\n`);
  }
  if (typeof parsed.values.html === 'string') {
    writeFileSync(parsed.values.html, htmlReport(report));
    process.stdout.write(`HTML report written to ${parsed.values.html}\n`);
  }
  if (interruptedBy) {
    // End as interrupted, as without this handler.
    process.kill(process.pid, interruptedBy);
    return -1;
  }
  // A generator process lost mid-run leaves figures that cannot be trusted as the whole load's.
  let status = report.users.completed === 0 || report.lostGenerators ? 1 : 0;
  if (baseline) {
    const comparison = compareReports(report, baseline);
    process.stdout.write('\n' + compareText(comparison, judging) + '\n');
    if (comparison.changes.some((c) => verdict(c, judging) === 'WORSE')) status = 1;
  }
  return status;
}
