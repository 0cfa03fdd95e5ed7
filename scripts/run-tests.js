#!/usr/bin/env node
// Runs the compiled test files with Node's test runner, then prints a summary
// Node's own does not give: passed, failed and skipped, with every skipped
// suite or test, its reason and what enables it (a skipped `describe` counts
// too). Suites that need outside services (MongoDB-wire servers, Redis,
// Chromium, nginx, HAProxy, root) skip themselves with a reason of the form
// `needs <what> — enable: <command>` (test/skips.ts); with
// PERSEID_TEST_EXPECT_ALL=1, as .ci/run sets, any such skip fails the run.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const dir = 'dist/test';
const only = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const flags = process.argv.slice(2).filter((a) => a.startsWith('-'));
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.test.js'))
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .map((f) => join(dir, f));
if (files.length === 0) {
  console.error(`run-tests: no test file matches ${only.join(', ')}`);
  process.exit(2);
}
const work = mkdtempSync(join(tmpdir(), 'perseid-tests-'));
const summaryFile = join(work, 'summary.json');
const result = spawnSync(
  process.execPath,
  [
    '--test',
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    '--test-reporter=./scripts/test-summary-reporter.js',
    `--test-reporter-destination=${summaryFile}`,
    `--test-concurrency=${process.env.TEST_CONCURRENCY ?? 2}`,
    // A hung test fails after this long instead of holding CI up. Node applies it to each file as a
    // whole too (every file runs in its own process), and the process suites take a minute or two.
    `--test-timeout=${process.env.TEST_TIMEOUT_MS ?? 240000}`,
    ...flags,
    ...files,
  ],
  { stdio: 'inherit' },
);

let summary;
try {
  summary = JSON.parse(readFileSync(summaryFile, 'utf8'));
} catch {
  console.log(`\nrun-tests: the test runner ended (status ${result.status ?? result.signal}) without a summary`);
  process.exit(result.status || 1);
} finally {
  rmSync(work, { recursive: true, force: true });
}

const ENABLE = / — enable: /;
const expectAll = process.env.PERSEID_TEST_EXPECT_ALL === '1';
const lines = ['', '── summary ' + '─'.repeat(60)];
if (summary.failures.length) {
  lines.push(`Failed (${summary.failures.length}):`);
  for (const f of summary.failures) lines.push(`  ✖ ${f.name}  [${f.file}]`);
}
if (summary.skipped.length) {
  lines.push(`Skipped (${summary.skipped.length}):`);
  for (const s of summary.skipped) lines.push(`  ${s.kind.padEnd(5)} ${s.name}  [${s.file}]`, `        ${s.reason}`);
}
if (summary.todo.length) {
  lines.push(`To do (${summary.todo.length}; run, but not counted):`);
  for (const t of summary.todo) lines.push(`  ${t.outcome.padEnd(6)} ${t.name}  [${t.file}]`, `         ${t.reason}`);
}
const unexpected = expectAll ? summary.skipped.filter((s) => ENABLE.test(s.reason)) : [];
if (unexpected.length) {
  lines.push(`PERSEID_TEST_EXPECT_ALL=1: ${unexpected.length} suite(s) or test(s) above were skipped for want of something CI must have: failing the run.`);
}
const suites = summary.skipped.filter((s) => s.kind === 'suite').length;
if (suites) lines.push(`(a skipped suite counts as one: its tests never ran, so they are not counted one by one)`);
// The last line alone, in the plain form CI reads.
lines.push(`tests: ${summary.passed} passed, ${summary.failed} failed, ${summary.skipped.length} skipped`);
console.log(lines.join('\n'));
process.exit(result.status !== 0 ? (result.status ?? 1) : unexpected.length ? 1 : 0);
