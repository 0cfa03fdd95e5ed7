#!/usr/bin/env node
// `npm create perseid <dir> [-- --template tasks]`: runs `perseid create` from the
// perseid package this one depends on, so there is one implementation of it.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const root = dirname(createRequire(import.meta.url).resolve('perseid/package.json'));
const args = process.argv.slice(2);
// `npm create perseid` with no directory: the usual default name. The value of an option (`--template chat`) is no directory.
const VALUED = new Set(['--template', '-t', '--perseid']);
const hasDirectory = args.some((arg, i) => !arg.startsWith('-') && !VALUED.has(args[i - 1]));
if (!hasDirectory && !args.includes('--help') && !args.includes('-h')) args.unshift('my-perseid-app');
const run = spawnSync(process.execPath, [join(root, 'dist/src/cli/main.js'), 'create', ...args], { stdio: 'inherit' });
process.exit(run.status ?? 1);
