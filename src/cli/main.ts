#!/usr/bin/env node
/**
 * The `perseid` command. It checks the Node version before loading the rest:
 * on a Node older than package.json's engines the rest fails as it links
 * (Node 18's node:zlib has no crc32), a stack trace even for --help, not a
 * line saying what to do. So this file imports only what every Node has.
 */
import { readFileSync } from 'node:fs';

const { engines } = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { engines: { node: string } };
// engines.node is ">=major.minor": the one form this package writes.
const [wantMajor = 0, wantMinor = 0] = /(\d+)\.(\d+)/.exec(engines.node)?.slice(1).map(Number) ?? [];
const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);

if (major < wantMajor || (major === wantMajor && minor < wantMinor)) {
  // Named as the commands name themselves in their errors ("perseid start: ..."), when the first argument is one.
  const command = /^[a-z]+$/.test(process.argv[2] ?? '') ? ` ${process.argv[2]}` : '';
  process.stderr.write(`perseid${command}: needs Node ${wantMajor}.${wantMinor} or later, and this is Node ${process.versions.node}: install a newer Node (https://nodejs.org) and run it again\n`);
  process.exitCode = 1;
} else {
  await import('./run.js');
}
