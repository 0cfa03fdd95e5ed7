/**
 * `perseid dev <app>`: runs the app with `perseid start`, watches its files,
 * and on a change restarts the server (the embedded store's data stays: it is
 * the same directory) with a new client version, so open pages reload (or
 * resubscribe) once they reconnect: Meteor's `meteor run` with hot code push.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLogger, setLogLevel } from '../log.js';
import { onePositional, type CommandSpec, type Parsed } from './args.js';
import { checkBeforeStart, readStartSettings, startCommand } from './start.js';

const { workers: _workers, ...serverOptions } = startCommand.options;

export const devCommand: CommandSpec = {
  takesArguments: true,
  name: 'dev',
  summary: 'Run a Perseid app while you work on it: restart on every change, and reload the pages that show it.',
  usage: 'perseid dev <app-module> [options]',
  example: 'perseid dev app.js --port 4000',
  options: {
    watch: {
      type: 'string',
      multiple: true,
      value: '<path>',
      help: 'A file or directory to watch (repeatable; default: the app module\'s directory, without node_modules, .git, .perseid, dist, coverage and *.log files)',
    },
    ...serverOptions,
  },
  details: [
    'Takes the options of `perseid start` (but one process: no --workers). On a change to a',
    'watched file the server restarts on the same data directory, so the data stays, and',
    'tells connected pages that a new version runs: the browser client reloads the page',
    '(new DDPClient(url, { hotCodePush: \'keep\' }) keeps it and resubscribes instead).',
    'TypeScript app files (.ts) run as they are. Ctrl-C stops.',
  ].join('\n'),
};

const CLI_MAIN = fileURLToPath(new URL('./main.js', import.meta.url));
// Log files too: output sent into the app's directory (npm run dev > dev.log) would restart the server on every line it writes.
const IGNORED = /(^|[/\\])(node_modules|\.git|\.perseid|dist|coverage)([/\\]|$)|\.log$/;

/** argv without the dev-only flags, for `perseid start`. */
function startArgs(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--watch') i++;
    else if (!arg.startsWith('--watch=')) out.push(arg);
  }
  return out;
}

export async function runDev(parsed: Parsed, argv: readonly string[] = process.argv.slice(3)): Promise<number | undefined> {
  const appPath = onePositional(parsed, 'Missing the app module: perseid dev <app-module>', 'app module');
  // As `perseid start` would check them: a bad flag, a port in use or a bad URL is one line now, not a wait for a save that cannot fix it.
  const settings = readStartSettings(parsed.values, process.env);
  await checkBeforeStart(appPath, settings, process.env);
  setLogLevel(settings.level);
  const log = createLogger('dev');
  const dataDir = resolve(settings.dataDir);
  const watched = ((parsed.values.watch as string[] | undefined) ?? [dirname(resolve(appPath))]).map((p) => resolve(p));
  const args = startArgs(argv);

  let child: ChildProcess | undefined;
  let generation = 0;
  let stopping = false;
  const start = () => {
    generation++;
    const version = `${Date.now().toString(36)}-${generation}`;
    // Its own process group: a terminal's Ctrl-C reaches dev alone, which stops the server once; the server
    // hearing it too and then dev's SIGINT would take that as a second signal and die in the middle of stopping.
    // The IPC channel tells the server when dev is gone, even killed outright. One process: dev has no --workers,
    // and PERSEID_WORKERS, meant for production, would make it a primary that a restart stops.
    const current = spawn(process.execPath, [CLI_MAIN, 'start', ...args], { stdio: ['inherit', 'inherit', 'inherit', 'ipc'], detached: true, env: { ...process.env, PERSEID_WORKERS: '', PERSEID_CLIENT_VERSION: version } });
    child = current;
    current.once('exit', (code, signal) => {
      if (child !== current) return;
      child = undefined;
      if (!stopping) log.warn(`the app stopped (${signal ?? `exit ${code}`}); waiting for a change to start it again`);
    });
  };
  /** Both stop at once, releasing the data directory; SIGUSR2 also tells the pages the server is back in a moment. */
  const stopChild = async (signal: 'SIGUSR2' | 'SIGINT') => {
    const current = child;
    if (!current) return;
    child = undefined;
    await new Promise<void>((done) => {
      current.once('exit', () => done());
      current.kill(signal);
    });
  };

  // Folders are skipped inside what is watched, not around it: an app in dist/ (perseid dev dist/app.js) is watched.
  const rootOf = (path: string) => watched.find((root) => path === root || path.startsWith(root + sep)) ?? process.cwd();
  const { watch } = await import('chokidar');
  const watcher = watch(watched, {
    ignoreInitial: true,
    ignored: (path: string) => IGNORED.test(relative(rootOf(path), path)) || path === dataDir || path.startsWith(dataDir + sep),
  });
  let timer: NodeJS.Timeout | undefined;
  let restarting = Promise.resolve();
  const changed = (path: string) => {
    clearTimeout(timer);
    // One restart for a burst of saves (an editor writes several files, or one twice).
    timer = setTimeout(() => {
      log.info(`${relative(process.cwd(), path) || path} changed: restarting`);
      restarting = restarting.then(() => stopChild('SIGUSR2')).then(() => {
        if (!stopping) start();
      });
    }, 100);
  };
  watcher.on('add', changed).on('change', changed).on('unlink', changed);
  await new Promise<void>((ready) => watcher.once('ready', () => ready()));
  log.info(`watching ${watched.map((p) => relative(process.cwd(), p) || '.').join(', ')} for changes`);
  // chokidar waits for a missing path to appear: a misspelt --watch would otherwise watch nothing without a word.
  for (const path of watched.filter((p) => !existsSync(p))) log.warn(`--watch ${relative(process.cwd(), path) || path}: no such file or directory; a save there restarts the app once it exists`);
  start();

  const shutdown = () => {
    if (stopping) process.exit(1);
    stopping = true;
    clearTimeout(timer);
    void Promise.all([watcher.close(), restarting.then(() => stopChild('SIGINT'))]).then(() => process.exit(0));
  };
  // SIGHUP too (a terminal closing): dying of it would leave the server running, holding the port and the data directory.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, shutdown);
  return undefined;
}
