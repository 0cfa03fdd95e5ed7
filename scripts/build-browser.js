#!/usr/bin/env node
// Bundles the browser entry of perseid/client (compiled by tsc first) into
// dist/browser/perseid-client.js. platform 'browser' makes esbuild refuse Node
// built-ins, so a Node-only import that sneaks into the client fails here, not in
// an application's bundler.
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

await build({
  absWorkingDir: root,
  entryPoints: ['dist/src/client/index.js'],
  outfile: 'dist/browser/perseid-client.js',
  bundle: true,
  platform: 'browser',
  format: 'esm',
  target: 'es2022',
  minify: true,
  sourcemap: true,
  logLevel: 'warning',
});
