#!/usr/bin/env node
// Runs the compiled test files with Node's test runner. Suites that need outside
// services (MongoDB-wire servers, Redis, Chromium) skip themselves and say how to
// enable them; this wrapper only picks the files and passes flags through.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const dir = 'dist/test';
const only = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const flags = process.argv.slice(2).filter((a) => a.startsWith('-'));
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.test.js'))
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .map((f) => join(dir, f));
const result = spawnSync(
  process.execPath,
  [
    '--test',
    '--test-reporter=spec',
    `--test-concurrency=${process.env.TEST_CONCURRENCY ?? 2}`,
    // A hung test fails after this long instead of holding CI up.
    `--test-timeout=${process.env.TEST_TIMEOUT_MS ?? 120000}`,
    ...flags,
    ...files,
  ],
  { stdio: 'inherit' },
);
process.exit(result.status ?? 1);
