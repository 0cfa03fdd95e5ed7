#!/usr/bin/env node
/**
 * `node dist/scripts/fuzz.js`: sends a million generated frames (valid,
 * mutated, deeply nested, oversized, partial, binary, garbage) over raw
 * WebSockets, SockJS WebSockets and SockJS xhr to a Perseid server it starts
 * on loopback, probing /health and a DDP round trip and sampling the server's
 * memory throughout. Prints what it sent and what came back; exits 1 if the
 * server fell over, a probe failed or memory passed its bound.
 */
import { writeFileSync } from 'node:fs';
import { KINDS } from './fuzz/generate.js';
import { scriptOptions } from './script-options.js';
import { TRANSPORTS } from './fuzz/connections.js';
import { DEFAULT_OPTIONS, runFuzz, type FuzzReport, type Progress } from './fuzz/run.js';

const HELP = `Fuzz a Perseid server over every transport, bounded in frames and time.

Usage: node dist/scripts/fuzz.js [options]

Options:
  --frames <n>        frames to send in all (default ${DEFAULT_OPTIONS.frames})
  --seconds <s>       stop after this long even if frames remain (default ${DEFAULT_OPTIONS.seconds})
  --connections <n>   fuzzing connections at a time, spread over the transports (default ${DEFAULT_OPTIONS.connections})
  --seed <text>       seed of the generator: the same seed sends the same frames (default ${DEFAULT_OPTIONS.seed})
  --max-rss-mb <n>    fail if the server's resident memory passes this many MiB (default ${DEFAULT_OPTIONS.maxRssMiB})
  --json <file>       also write the report as JSON
  -h, --help          show this help

The server is \`perseid start\` on the fuzz app (an echo, bounded writes, a
publication), on 127.0.0.1, a random port and a fresh store; it is stopped at
the end. Frames: ${KINDS.join(', ')}. Transports: ${TRANSPORTS.join(', ')}.
Exit status: 0 when the server stayed up, every /health probe and DDP round
trip succeeded and memory stayed under its bound; 1 otherwise; 2 for bad options.`;

function progressLine(p: Progress): string {
  const rate = Math.round(p.frames / Math.max(1, p.elapsedMs / 1000));
  const ms = (v: number | undefined) => (v === undefined ? '—' : `${Math.round(v)} ms`);
  return `[fuzz] ${(p.elapsedMs / 1000).toFixed(0)} s  frames ${p.frames.toLocaleString('en')} (${rate.toLocaleString('en')}/s)  replies ${p.replies.toLocaleString('en')}  server RSS ${p.rssMiB} MiB  /health ${ms(p.healthMs)}  DDP ${ms(p.ddpMs)}`;
}

function table(report: FuzzReport): string {
  const lines = ['', 'Sent, by kind and transport:', `  ${'kind'.padEnd(10)}${TRANSPORTS.map((t) => t.padStart(18)).join('')}${'total'.padStart(12)}`];
  for (const kind of KINDS) {
    const row = TRANSPORTS.map((t) => report.sent[`${t} ${kind}`] ?? 0);
    lines.push(`  ${kind.padEnd(10)}${row.map((n) => n.toLocaleString('en').padStart(18)).join('')}${row.reduce((a, b) => a + b, 0).toLocaleString('en').padStart(12)}`);
  }
  const totals = TRANSPORTS.map((t) => KINDS.reduce((n, k) => n + (report.sent[`${t} ${k}`] ?? 0), 0));
  lines.push(`  ${'total'.padEnd(10)}${totals.map((n) => n.toLocaleString('en').padStart(18)).join('')}${totals.reduce((a, b) => a + b, 0).toLocaleString('en').padStart(12)}`);
  const list = (title: string, counts: Record<string, number>) => {
    lines.push('', title);
    for (const [key, n] of Object.entries(counts).sort((a, b) => b[1] - a[1])) lines.push(`  ${n.toLocaleString('en').padStart(10)}  ${key}`);
  };
  list('Came back (DDP messages; errors by reason):', report.replies);
  list('Connections closed by the server (transport, code):', report.closes);
  list('xhr_send answers (HTTP status):', report.http);
  const p = (name: string, f: FuzzReport['probes']['health']) =>
    `  ${name}: ${f.ok} ok, ${f.failed} failed; p50 ${f.p50} ms, p99 ${f.p99} ms, max ${f.max} ms${f.failures.length ? `; ${f.failures.join('; ')}` : ''}`;
  lines.push('', 'Probes throughout:', p('/health', report.probes.health), p('DDP round trip', report.probes.ddp));
  lines.push('', `Server memory (RSS): ${report.rss.startMiB} MiB at the start, ${report.rss.maxMiB} MiB at most, ${report.rss.endMiB} MiB at the end (bound ${report.options.maxRssMiB} MiB)`);
  if (report.serverLog.length) lines.push('', 'Server warnings and errors (last 20):', ...report.serverLog.map((l) => `  ${l}`));
  lines.push('', `${(report.elapsedMs / 1000).toFixed(1)} s; ${report.failures.length ? `FAILED: ${report.failures.join('; ')}` : 'the server stayed up and answered throughout'}`);
  return lines.join('\n');
}

const { values, integer: count } = scriptOptions('fuzz', HELP, {
  frames: { type: 'string' },
  seconds: { type: 'string' },
  connections: { type: 'string' },
  seed: { type: 'string' },
  'max-rss-mb': { type: 'string' },
  json: { type: 'string' },
});

const tty = process.stderr.isTTY;
let lastLine = 0;
const report = await runFuzz({
  frames: count(values.frames, 'frames', DEFAULT_OPTIONS.frames),
  seconds: count(values.seconds, 'seconds', DEFAULT_OPTIONS.seconds),
  connections: count(values.connections, 'connections', DEFAULT_OPTIONS.connections),
  seed: values.seed ?? DEFAULT_OPTIONS.seed,
  maxRssMiB: count(values['max-rss-mb'], 'max-rss-mb', DEFAULT_OPTIONS.maxRssMiB),
  onProgress: (p) => {
    if (tty) process.stderr.write(`\r${progressLine(p)}\x1b[K`);
    else if (p.elapsedMs - lastLine >= 5000) {
      lastLine = p.elapsedMs;
      process.stderr.write(progressLine(p) + '\n');
    }
  },
});
if (tty) process.stderr.write('\n');
process.stdout.write(table(report) + '\n');
if (values.json) writeFileSync(values.json, JSON.stringify(report, null, 2));
process.exit(report.failures.length ? 1 : 0);
