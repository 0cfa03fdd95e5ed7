#!/usr/bin/env node
/**
 * `node dist/scripts/live-diff.js`: the differential test of live queries
 * (live-diff/run.ts) at length, on each database target in turn. Prints a
 * progress line per burst and every divergence with what replays it; exits 1
 * if a client's view differed from a fresh query once things settled.
 */
import { setLogLevel } from '../src/log.js';
import { scriptOptions } from './script-options.js';
import { DEFAULT_DIFF_OPTIONS, runLiveDiff, type DiffReport } from './live-diff/run.js';
import { TARGETS, type TargetName } from './live-diff/targets.js';

const HELP = `Compare what DDP clients are shown with fresh queries of the database, through random writes.

Usage: node dist/scripts/live-diff.js [options]

Options:
  --target <name>        database target, repeatable (default: all): ${TARGETS.join(', ')}
  --seed <text>          seed of the writes and subscriptions: the same seed replays the same run (default ${DEFAULT_DIFF_OPTIONS.seed})
  --seeds <n>            runs per target, seeds <seed>-1 ... <seed>-n (default 1: the seed itself)
  --steps <n>            bursts of writes per run, each followed by a comparison (default ${DEFAULT_DIFF_OPTIONS.steps})
  --connections <n>      client connections, at least 2 (default ${DEFAULT_DIFF_OPTIONS.connections})
  --interrupt-every <n>  re-read the change feed in the middle of every n-th burst, 0 for never (default ${DEFAULT_DIFF_OPTIONS.interruptEvery})
  --port <n>             first port to listen on (fan-out uses the next too; default any)
  --trace                print each burst's writes and subscription changes, and at a divergence the documents
  -h, --help             show this help

MongoDB-wire targets need the services (npm run services start); clients are
simpleddp from npm over WebSockets on 127.0.0.1. Exit status: 0 when every view
matched, 1 on a divergence, 2 for bad options.`;

const { values, fail, integer: count } = scriptOptions('live-diff', HELP, {
  target: { type: 'string', multiple: true },
  seed: { type: 'string' },
  seeds: { type: 'string' },
  steps: { type: 'string' },
  connections: { type: 'string' },
  'interrupt-every': { type: 'string' },
  port: { type: 'string' },
  trace: { type: 'boolean' },
});

const targets = (values.target ?? [...TARGETS]) as TargetName[];
for (const t of targets) if (!TARGETS.includes(t)) fail(`--target must be one of ${TARGETS.join(', ')} (got ${t})`);
const seed = values.seed ?? DEFAULT_DIFF_OPTIONS.seed;
const seeds = count(values.seeds, 'seeds', 1);
const options = {
  steps: count(values.steps, 'steps', DEFAULT_DIFF_OPTIONS.steps),
  connections: count(values.connections, 'connections', DEFAULT_DIFF_OPTIONS.connections, 2),
  interruptEvery: count(values['interrupt-every'], 'interrupt-every', DEFAULT_DIFF_OPTIONS.interruptEvery, 0),
  port: count(values.port, 'port', 0, 0),
};
setLogLevel('error');

const reports: DiffReport[] = [];
for (const target of targets) {
  for (let i = 1; i <= seeds; i++) {
    const report = await runLiveDiff({ ...options, target, seed: seeds === 1 ? seed : `${seed}-${i}`, progress: (line) => process.stderr.write(`${line}\n`), trace: values.trace ? (line) => process.stderr.write(`${line}\n`) : undefined });
    reports.push(report);
    for (const d of report.divergences) {
      process.stdout.write(`DIVERGED ${target}, seed ${report.seed}, burst ${d.step + 1}, connection ${d.connection} (${d.shapes.join(', ')}): ${d.problem}\n`);
      process.stdout.write(`  replay: node dist/scripts/live-diff.js --target ${target} --seed ${report.seed} --steps ${d.step + 1}\n`);
    }
  }
}
for (const r of reports) {
  process.stdout.write(`${r.target.padEnd(24)} seed ${r.seed}: ${r.steps} bursts, ${r.writes} writes (${r.directWrites} direct), ${r.subscriptions} subscriptions, ${r.interrupts} interrupts, ${r.checks} checks, slowest settle ${r.slowestSettleMs} ms, ${(r.elapsedMs / 1000).toFixed(1)} s: ${r.divergences.length ? 'DIVERGED' : 'ok'}\n`);
}
process.exit(reports.some((r) => r.divergences.length) ? 1 : 0);
