/**
 * Loads an app module (ESM or CommonJS, JavaScript or TypeScript) and runs its
 * setup, turning what goes wrong into one line a person can act on: the file
 * is missing, it has a syntax error or imports a name its module does not
 * export (with its file and line), it is written in the other module format,
 * it throws while loading or while setting up.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { basename, dirname, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createLogger } from '../log.js';
import type { PerseidServer } from '../server/app.js';
import { StartupError } from './startup-error.js';
import { enableTypeScript, TYPESCRIPT_FILE } from './typescript.js';

export type AppSetup = (server: PerseidServer) => unknown;

/** Perseid's own files: a stack frame in them is not where the app went wrong. */
const PACKAGE_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

function shown(file: string): string {
  const path = file.startsWith('file:') ? fileURLToPath(file) : file;
  const rel = relative(process.cwd(), path);
  return rel.startsWith('..') ? path : rel;
}

/** `file:line:column` of the first stack frame in the app's own code, if any. */
export function appLocation(error: unknown): string | undefined {
  const stack = error instanceof Error ? (error.stack ?? '') : '';
  for (const match of stack.matchAll(/(?:\(|at )((?:file:\/\/)?\/[^():\s]+):(\d+):(\d+)\)?$/gm)) {
    const file = match[1]!.startsWith('file:') ? fileURLToPath(match[1]!) : match[1]!;
    if (file.startsWith(PACKAGE_ROOT) || file.includes(`${sep}node_modules${sep}`)) continue;
    return `${shown(file)}:${match[2]}:${match[3]}`;
  }
  return undefined;
}

function firstLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split('\n').find((line) => line.trim() !== '')?.trim() ?? 'unknown error';
}

/**
 * Where a syntax error found while linking ES modules is: Node 20 keeps it off
 * the error object and prints it only for an uncaught error, so a child process
 * links the same module (nothing runs: linking fails first) and says where.
 */
function syntaxErrorLocation(url: string): string | undefined {
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(url)})`], {
    encoding: 'utf8',
    timeout: 10000,
  });
  const match = /^((?:file:\/\/)?\/.+?):(\d+)$/m.exec(child.stderr ?? '');
  return match ? `${shown(match[1]!)}:${match[2]}` : undefined;
}

/** Node's link error for a named import its module lacks (a SyntaxError, though the syntax is fine), said as what to change. */
function missingExport(message: string): string | undefined {
  const esm = /The requested module '([^']+)' does not provide an export named '([^']+)'/.exec(message);
  if (esm) return `imports ${esm[2]} from '${esm[1]}', which has no export of that name: check its spelling and case`;
  const cjs = /^Named export '([^']+)' not found\. The requested module '([^']+)' is a CommonJS module/.exec(message);
  if (cjs) return `imports ${cjs[1]} from '${cjs[2]}', a CommonJS module that does not export it by name: import its default export and read ${cjs[1]} from that`;
  return undefined;
}

function explainLoadError(error: unknown, file: string): StartupError {
  const name = shown(file);
  const message = firstLine(error);
  const code = (error as NodeJS.ErrnoException).code;
  const pkg = 'package.json';
  if (/Cannot use import statement outside a module|Unexpected token 'export'/.test(message)) {
    // "set", not "add": a package.json from npm init -y says "type": "commonjs", to be changed rather than added to.
    return new StartupError(
      `${name} uses import/export but Node loads it as CommonJS: set "type": "module" in ${pkg} (or rename it to ${basename(file).replace(/\.[^.]+$/, '.mjs')})`,
      error,
    );
  }
  if (/(require|module|exports|__dirname|__filename) is not defined in ES module scope/.test(message)) {
    const where = appLocation(error);
    return new StartupError(
      `${where ?? name} uses ${message.split(' ')[0]} but Node loads it as an ES module ("type": "module" in ${pkg}): use import/export, or rename it to ${basename(file).replace(/\.[^.]+$/, '.cjs')}`,
      error,
    );
  }
  if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') {
    const missing = /Cannot find (?:package|module) '([^']+)'/.exec(message)?.[1];
    const bare = missing && !missing.startsWith('.') && !missing.startsWith('/');
    return new StartupError(`${name} could not load its imports: ${message}${bare ? ` (npm install ${missing.split('/').slice(0, missing.startsWith('@') ? 2 : 1).join('/')})` : ''}`, error);
  }
  // tsx (esbuild) reports a TypeScript syntax error as "Transform failed", the place on the next line.
  const transform = /^(\/[^\n]+?):(\d+:\d+): ERROR: (.+)$/m.exec(error instanceof Error ? error.message : '');
  if (message.startsWith('Transform failed') && transform) return new StartupError(`syntax error in ${shown(transform[1]!)}:${transform[2]}: ${transform[3]}`, error);
  if (error instanceof SyntaxError) {
    // A syntax error thrown by running code (JSON.parse, new Function) has the app's frame; one from parsing has none.
    const where = appLocation(error) ?? (TYPESCRIPT_FILE.test(file) ? undefined : syntaxErrorLocation(pathToFileURL(file).href)) ?? name;
    const missing = missingExport(message);
    return new StartupError(missing ? `${where} ${missing}` : `syntax error in ${where}: ${message}`, error);
  }
  const where = appLocation(error);
  return new StartupError(`${name} failed while loading: ${message}${where ? ` (at ${where})` : ''}`, error);
}

/**
 * Node 20.19+ runs an ES module in a package.json without "type" after
 * parsing it as CommonJS first, and warns in four lines (once per package):
 * one line naming the file and the package.json to change instead.
 */
function typelessPackage(warning: Error): string | undefined {
  if ((warning as NodeJS.ErrnoException).code !== 'MODULE_TYPELESS_PACKAGE_JSON') return undefined;
  const file = /(file:\/\/\S+) is not specified/.exec(warning.message)?.[1];
  const pkg = /add "type": "module" to (.+?)\.?$/m.exec(warning.message)?.[1];
  if (!file || !pkg) return undefined;
  return `${shown(file)} is an ES module but ${shown(pkg)} does not say so: add "type": "module" to it (or rename the file to .mjs); Node otherwise parses it twice`;
}

/** Fails unless `path` is a file; resolves it. */
export function checkAppFile(path: string): string {
  const file = resolve(path);
  if (!existsSync(file)) throw new StartupError(`app module ${path} not found (no such file in ${dirname(file)}): give the path of your app file, e.g. perseid start app.js`);
  if (!statSync(file).isFile()) throw new StartupError(`app module ${path} is a directory: give the path of your app file, e.g. perseid start ${path}/app.js`);
  return file;
}

/**
 * `work`, or a StartupError saying what never finished when the event loop empties first (a top-level await or
 * a setup awaiting a promise nothing will settle): Node would end the process with status 0 and no word.
 */
async function unlessStranded<T>(work: Promise<T>, what: string): Promise<T> {
  let stranded = () => undefined as void;
  const never = new Promise<never>((_, reject) => {
    stranded = () => reject(new StartupError(`${what}: it awaits a promise that nothing left to run can settle`));
  });
  process.once('beforeExit', stranded);
  try {
    return await Promise.race([work, never]);
  } finally {
    process.off('beforeExit', stranded);
  }
}

/** Imports the app module and returns its setup function (the default export, or module.exports for CommonJS). */
export async function loadAppModule(path: string): Promise<AppSetup> {
  const file = checkAppFile(path);
  if (TYPESCRIPT_FILE.test(file)) await enableTypeScript();
  let loaded: { default?: unknown };
  // Node's own warnings about the module format (several lines each) become our one line saying what to do.
  const printers = process.listeners('warning');
  const filter = (warning: Error) => {
    // Node 20's and Node 24's warnings before an ES module fails to load as CommonJS: it fails next, and says so.
    if (/^(To load an ES module|Failed to load the ES module)/.test(warning.message)) return;
    const typeless = typelessPackage(warning);
    if (typeless) createLogger('perseid').warn(typeless);
    else for (const print of printers) print(warning);
  };
  process.removeAllListeners('warning').on('warning', filter);
  try {
    loaded = (await unlessStranded(import(pathToFileURL(file).href), `${shown(file)} never finished loading`)) as { default?: unknown };
  } catch (error) {
    throw error instanceof StartupError ? error : explainLoadError(error, file);
  } finally {
    // Node emits a warning on a later tick, which a module with no I/O to wait on reaches only after the import resolved.
    await new Promise((next) => setImmediate(next));
    process.off('warning', filter);
    for (const print of printers) process.on('warning', print);
  }
  // CommonJS compiled from ES modules puts the function at module.exports.default.
  let setup = loaded.default;
  if (typeof setup === 'object' && setup !== null && typeof (setup as { default?: unknown }).default === 'function') setup = (setup as { default: unknown }).default;
  if (typeof setup !== 'function') {
    // `export default { methods }` is a default export too: saying there is none would send its author looking for the wrong thing.
    const kind = setup === null ? 'null' : Array.isArray(setup) ? 'an array' : `a${/^[aeiou]/.test(typeof setup) ? 'n' : ''} ${typeof setup}`;
    const found = setup === undefined ? ' has no default export' : `'s default export is ${kind}, not a function`;
    throw new StartupError(`${shown(file)}${found}: end it with export default function app(server) { ... } (module.exports = function app(server) { ... } in CommonJS)`);
  }
  return setup as AppSetup;
}

/** Runs the app's setup; a failure names the app's line that failed. */
export async function runAppSetup(setup: AppSetup, server: PerseidServer, path: string): Promise<void> {
  try {
    await unlessStranded(Promise.resolve(setup(server)), `${shown(resolve(path))}'s setup never finished`);
  } catch (error) {
    if (error instanceof StartupError) throw error;
    const where = appLocation(error);
    throw new StartupError(`${shown(resolve(path))} failed while setting up the server: ${firstLine(error)}${where ? ` (at ${where})` : ''}`, error);
  }
}
