#!/usr/bin/env node
// Bundles perseid/client (compiled by tsc first) for pages: dist/browser/
// perseid-client.js, and perseid-react.js (the client with perseid/react's
// hooks, React left external). platform 'browser' makes esbuild refuse Node
// built-ins, so a Node-only import that sneaks into the client fails here, not
// in an application's bundler. Then it measures both (minified, gzip) against
// simpleddp bundled the same way, prints the figures and writes them to
// dist/browser/sizes.json (BENCHMARKS.md records them). `--analyze` also prints
// what each module adds to perseid/client (esbuild's metafile analysis), to see
// where the bytes go before trying to cut them.
import { analyzeMetafile, build } from 'esbuild';
import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

const args = process.argv.slice(2);
if (args.includes('--help')) {
  console.log('Usage: node scripts/build-browser.js [--analyze]\n  builds dist/browser/ from dist/src/ (run tsc first; npm run build does both)\n  --analyze  also print the minified bytes each module adds to perseid/client');
  process.exit(0);
}
const unknown = args.find((arg) => arg !== '--analyze');
if (unknown !== undefined) {
  console.error(`build-browser: unknown option ${unknown} (see --help)`);
  process.exit(2);
}

const root = fileURLToPath(new URL('..', import.meta.url));
const options = { absWorkingDir: root, bundle: true, platform: 'browser', format: 'esm', target: 'es2022', minify: true, logLevel: 'warning' };

function size(bytes) {
  return { minified: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
}

await build({ ...options, entryPoints: ['dist/src/client/index.js'], outfile: 'dist/browser/perseid-client.js', sourcemap: true });
await build({
  ...options,
  stdin: { contents: "export * from './dist/src/client/index.js';\nexport * from './dist/src/react/index.js';\n", resolveDir: root, sourcefile: 'perseid-react.js' },
  outfile: 'dist/browser/perseid-react.js',
  external: ['react'],
  sourcemap: true,
});

/** Sizes of a bundle, and how much of the minified bytes mingo (the query engine) makes up. */
async function measure(contents, external = [], analyze = false) {
  const result = await build({ ...options, stdin: { contents, resolveDir: root }, write: false, external, metafile: true });
  if (analyze) console.log(await analyzeMetafile(result.metafile));
  const [output] = Object.values(result.metafile.outputs);
  const mingo = Object.entries(output.inputs)
    .filter(([path]) => path.includes('node_modules/mingo/'))
    .reduce((sum, [, input]) => sum + input.bytesInOutput, 0);
  return { ...size(result.outputFiles[0].contents), ...(mingo > 0 ? { mingoMinified: mingo } : {}) };
}

const sizes = {
  'perseid/client': await measure("export * from './dist/src/client/index.js';", [], args.includes('--analyze')),
  'perseid/client + perseid/react (React external)': await measure(
    "export * from './dist/src/client/index.js';\nexport * from './dist/src/react/index.js';",
    ['react'],
  ),
};
// simpleddp is a devDependency: measured where it is installed (every build of this repository).
try {
  createRequire(import.meta.url).resolve('simpleddp');
  sizes.simpleddp = await measure("export { default } from 'simpleddp';");
} catch {
  // not installed (a production install): nothing to compare with
}
writeFileSync('dist/browser/sizes.json', `${JSON.stringify(sizes, null, 2)}\n`);
const kb = (n) => `${(n / 1024).toFixed(1)} KiB`;
for (const [name, { minified, gzip, mingoMinified }] of Object.entries(sizes)) {
  const share = mingoMinified ? ` (mingo: ${kb(mingoMinified)} of the minified)` : '';
  console.log(`browser bundle ${name}: ${kb(minified)} minified, ${kb(gzip)} gzip${share}`);
}
