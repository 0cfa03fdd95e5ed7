/** `perseid start <app>`: open the database, load the app module, serve it. */
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { availableParallelism } from 'node:os';
import { Primary } from '../cluster/primary.js';
import { LoadMonitor } from '../cluster/load-monitor.js';
import { processId } from '../cluster/membership.js';
import { isWorker, primaryFeedLink, serveAsWorker } from '../cluster/worker.js';
import { getDefaultDatabase, setDefaultDatabaseOptions, type Database } from '../collections/database.js';
import { DatabaseUnavailableError } from '../data/driver.js';
import type { ChangeSourceChoice } from '../data/mongo/store.js';
import type { ChangeSourceKind } from '../data/change-source.js';
import { createLogger, setLogContext, setLogLevel, type Logger, type LogLevel } from '../log.js';
import { apmSetting } from '../metrics/apm.js';
import { createServer, DEFAULT_COMPRESSION, type PerseidServer, type ServerOptions } from '../server/app.js';
import { forwardedCountFromEnv } from '../server/connection-handle.js';
import { limitSilentConnections } from '../server/silent-connections.js';
import type { CompressionOptions } from '../transport/frames.js';
import { parseAllowedOrigins } from '../transport/origins.js';
import { checkAppFile, loadAppModule, runAppSetup, type AppSetup } from './app-module.js';
import { integerOption, onePositional, UsageError, type CommandSpec, type Parsed } from './args.js';
import { ADMIN_ADDRESS, checkLiveQuerySettings, checkDataDir, checkMongoUrls, checkPort, checkRedis, listenOn } from './preflight.js';
import { protectionOptions, readProtection } from './protection.js';
import { StartupError } from './startup-error.js';
import { StoreError } from '../data/embedded/store-errors.js';
import { readJobsSettings, readRole, roleOptions, startJobs } from './jobs-role.js';
import { joinCluster, openFanout, readScaleOut, scaleOutOptions } from './scale-out.js';

export const startCommand: CommandSpec = {
  takesArguments: true,
  name: 'start',
  summary: 'Run a Perseid app: serve its methods and publications over DDP (WebSocket and SockJS) and its static files over HTTP.',
  usage: 'perseid start <app-module> [options]',
  example: 'perseid start app.js --port 4000',
  options: {
    port: { type: 'string', short: 'p', env: 'PORT', default: '3000', value: '<port>', help: 'Port to listen on' },
    host: { type: 'string', env: 'HOST', default: '127.0.0.1', value: '<address>', help: 'Address to bind (0.0.0.0 for every interface)' },
    'data-dir': {
      type: 'string',
      env: 'PERSEID_DATA_DIR',
      default: '.perseid/data',
      value: '<dir>',
      help: 'Directory of the embedded store',
    },
    fsync: { type: 'boolean', env: 'PERSEID_FSYNC', help: 'Acknowledge writes only once on disk (survives power loss, slower)' },
    compression: {
      type: 'string',
      env: 'PERSEID_COMPRESSION',
      value: '<bytes|off>',
      help: 'Compress WebSocket messages of at least this many bytes, or off (default 1024; Meteor\'s SERVER_WEBSOCKET_COMPRESSION is honoured too)',
    },
    'log-level': { type: 'string', env: 'PERSEID_LOG_LEVEL', default: 'info', value: '<level>', help: 'debug, info, warn, error or silent' },
    workers: {
      type: 'string',
      short: 'w',
      env: 'PERSEID_WORKERS',
      value: '<n|auto>',
      help: 'Run n worker processes (auto: one per core) behind this one; needs MONGO_URL',
    },
    'drain-ms': {
      type: 'string',
      env: 'PERSEID_DRAIN_MS',
      default: '10000',
      value: '<ms>',
      help: 'On SIGTERM, close open connections spread over this long, so clients reconnect elsewhere gradually (a connection still running a method gets at most one more window: allow twice this before a kill)',
    },
    'admin-port': {
      type: 'string',
      env: 'PERSEID_ADMIN_PORT',
      value: '<port>',
      help: 'Serve the operational endpoints (/metrics, /perseid/dashboard, /perseid/stats, ...) on this port of --admin-host instead of the main one',
    },
    'admin-host': { type: 'string', env: 'PERSEID_ADMIN_HOST', default: '127.0.0.1', value: '<address>', help: 'Address the --admin-port server binds' },
    ...scaleOutOptions,
    ...roleOptions,
    ...protectionOptions,
  },
  details: [
    'The app module\'s default export is called with the server before it starts listening:',
    '',
    '  export default function app(server) {',
    '    server.methods({ ... });',
    '    server.publish(\'name\', function () { return collection.find(); });',
    '  }',
    '',
    'With MONGO_URL set, collections live in MongoDB instead of the embedded store.',
    'SIGTERM drains (see --drain-ms); SIGINT (Ctrl-C) and SIGHUP stop at once; SIGUSR2 stops at once telling clients to come back (perseid dev restarts it so).',
    'The operational endpoints (/metrics, /perseid/dashboard, /perseid/apm, /perseid/advice, /perseid/capacity, /perseid/stats)',
    'answer loopback only, or, with PERSEID_ADMIN_TOKEN set, only requests sending it as Authorization: Bearer <token>.',
    'PERSEID_APM=off turns the APM\'s recording off.',
    'An unexpected exception outside any one connection is logged with its stack and exits with status 1, for a supervisor to restart.',
  ].join('\n'),
};

const LEVELS = ['debug', 'info', 'warn', 'error', 'silent'];

/** Meteor's SERVER_WEBSOCKET_COMPRESSION: JSON, a falsy value turns compression off. */
function meteorCompression(raw: string | undefined): Partial<CompressionOptions> | false | undefined {
  if (raw === undefined || raw === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    throw new UsageError('SERVER_WEBSOCKET_COMPRESSION must be JSON');
  }
  if (!value) return false;
  return typeof value === 'object' ? (value as Partial<CompressionOptions>) : {};
}

export function compressionOption(raw: string | boolean | undefined, env: NodeJS.ProcessEnv): CompressionOptions | false {
  if (raw === undefined) {
    const meteor = meteorCompression(env.SERVER_WEBSOCKET_COMPRESSION);
    return meteor === false ? false : { ...DEFAULT_COMPRESSION, ...meteor };
  }
  if (typeof raw === 'string' && ['off', 'false', 'no', '0'].includes(raw.toLowerCase())) return false;
  const threshold = Number(raw);
  if (!Number.isInteger(threshold) || threshold < 1) throw new UsageError(`--compression must be a byte count or off (got ${String(raw)})`);
  return { ...DEFAULT_COMPRESSION, threshold };
}

/** Creates the server, reporting the database's health on /health, and runs the app's setup on it. */
async function bootApp(setup: AppSetup, appPath: string, options: ServerOptions, database: Database): Promise<PerseidServer> {
  const server = createServer({ ...options, clientVersion: process.env.PERSEID_CLIENT_VERSION || undefined });
  server.healthCheck('database', () => database.driver.problem?.());
  await runAppSetup(setup, server, appPath);
  return server;
}

/** Opens the default database (the app may have opened it while loading); a data directory that cannot be used is one line. */
async function openAppDatabase(dataDir: string | undefined): Promise<Database> {
  try {
    return await getDefaultDatabase();
  } catch (error) {
    // A store in use or damaged already says what to do, in one line.
    if (error instanceof DatabaseUnavailableError || error instanceof StartupError || error instanceof StoreError || dataDir === undefined) throw error;
    throw new StartupError(`cannot open the data directory ${dataDir}: ${(error as Error).message}`, error);
  }
}


/** The `--admin-port` server: the operational endpoints only (still behind the admin check). */
async function serveAdmin(answer: (req: IncomingMessage, res: ServerResponse) => boolean, port: number, host: string, perAddress: number | undefined, log: Logger): Promise<void> {
  const server = createHttpServer((req, res) => {
    if (answer(req, res)) return;
    res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
    res.end('Not found: this port serves /metrics, /perseid/dashboard, /perseid/apm, /perseid/advice, /perseid/capacity and /perseid/stats\n');
  });
  limitSilentConnections(server, { perAddress, forwardedCount: forwardedCountFromEnv(), upgrades: false });
  await listenOn(
    () => new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, host, () => resolve())),
    port,
    host,
    ADMIN_ADDRESS,
  );
  server.unref();
  log.info(`operational endpoints at ${shownUrl(host, port)}/perseid/dashboard`);
}

/** How long start-up waits for Redis to answer (PERSEID_CONNECT_TIMEOUT_MS, default 10 s). */
function connectTimeoutMs(env: NodeJS.ProcessEnv): number {
  const ms = Number(env.PERSEID_CONNECT_TIMEOUT_MS || 10000);
  if (!Number.isInteger(ms) || ms < 1) throw new UsageError(`PERSEID_CONNECT_TIMEOUT_MS must be a number of milliseconds (got ${env.PERSEID_CONNECT_TIMEOUT_MS})`);
  return ms;
}

function workerCount(raw: string | boolean | string[] | undefined): number {
  if (raw === undefined || raw === '0') return 0;
  if (raw === 'auto') return availableParallelism();
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > 256) throw new UsageError(`--workers must be a count or auto (got ${String(raw)})`);
  return n;
}

function shownUrl(host: string, port: number): string {
  const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return `http://${shown}:${port}`;
}

/**
 * The last resort: an exception nothing caught (no client input can cause one:
 * each connection's handling is contained) leaves state that cannot be
 * trusted, so it is logged, stack and all, on one line, and the process exits
 * for its supervisor to restart it.
 */
function exitOnUncaught(log: Logger): void {
  const fatal = (kind: string) => (error: unknown) => {
    log.error(`${kind}: exiting (state after an unexpected exception cannot be trusted; a supervisor should restart the server)`, { error });
    process.exit(1);
  };
  process.on('uncaughtException', fatal('uncaught exception'));
  process.on('unhandledRejection', fatal('unhandled promise rejection'));
}

/** Runs `work` (a drain, a close), then exits: 0 after a last line saying the process stopped, 1 after one saying why not. */
function exitAfter(log: Logger, work: () => Promise<unknown>): void {
  const started = Date.now();
  work().then(
    () => {
      log.info('stopped', { ms: Date.now() - started });
      process.exit(0);
    },
    (error: unknown) => {
      log.error('shutdown failed', { error });
      process.exit(1);
    },
  );
}

/**
 * SIGTERM drains gradually (orchestrators send it); SIGINT, a person's Ctrl-C,
 * and SIGHUP, their terminal closing, stop now; SIGUSR2 (perseid dev's
 * restart) stops now telling clients the server is back in a moment; a second
 * signal exits. Losing the parent that started it over IPC (perseid dev) stops
 * it now too. Caught from the moment the server listens, since from then
 * `/health` answers and whoever waits for it may signal at once; a signal that
 * arrives before the rest has started is acted on once it has. The returned
 * function gives the work and says whether a signal came first.
 */
function catchSignals(log: Logger): (drain: () => Promise<void>, stop: () => Promise<void>, restart?: () => Promise<void>) => boolean {
  let stopping = false;
  let caught: string | undefined;
  let work: ((signal: string) => () => Promise<void>) | undefined;
  const handle = (signal: string) => {
    if (stopping) {
      log.warn('second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    log.info(signal === 'SIGTERM' ? 'draining, then stopping' : signal === 'SIGUSR2' ? 'stopping to restart' : 'stopping', { signal });
    if (work) exitAfter(log, work(signal));
    else caught = signal;
  };
  // `on`, not `once`: a second signal of the same kind (Ctrl-C pressed again) must reach the handler, not Node's default.
  for (const signal of ['SIGINT', 'SIGHUP', 'SIGTERM', 'SIGUSR2'] as const) process.on(signal, () => handle(signal));
  // Started by perseid dev, which holds the other end of this channel: dev killed outright leaves no one else to stop it.
  if (process.send) process.once('disconnect', () => handle('disconnect'));
  return (drain, stop, restart = stop) => {
    work = (signal) => (signal === 'SIGTERM' ? drain : signal === 'SIGUSR2' ? restart : stop);
    if (caught) exitAfter(log, work(caught));
    return stopping;
  };
}

/** `perseid start`'s options, read and checked: a value a person got wrong is refused before anything starts. */
export function readStartSettings(values: Parsed['values'], env: NodeJS.ProcessEnv) {
  const level = String(values['log-level']);
  if (!LEVELS.includes(level)) throw new UsageError(`--log-level must be one of ${LEVELS.join(', ')}`);
  const port = integerOption(values, 'port', 0, 65535)!;
  const compression = compressionOption(values.compression as string | undefined, env);
  const role = readRole(values);
  const jobs = readJobsSettings(values);
  if (apmSetting(env.PERSEID_APM) === undefined) throw new UsageError(`PERSEID_APM must be on or off (got ${env.PERSEID_APM})`);
  // Read wrong, it would count as 0: every client the proxy's address, and loopback (the operational endpoints open) when the proxy runs on this host.
  const forwarded = env.HTTP_FORWARDED_COUNT?.trim();
  if (forwarded && !/^\d+$/.test(forwarded)) throw new UsageError(`HTTP_FORWARDED_COUNT must be the number of proxies in front of the server, 0 or more (got ${forwarded})`);
  const serverOptions: ServerOptions = { compression, role, ...readProtection(values) };
  const adminPort = values['admin-port'] === undefined ? undefined : integerOption(values, 'admin-port', 1, 65535)!;
  const host = String(values.host);
  const adminHost = String(values['admin-host']);
  // Else the admin server fails to bind once the app has started, as if another server held the port.
  if (adminPort === port && (adminHost === host || [host, adminHost].some((h) => h === '0.0.0.0' || h === '::'))) {
    throw new UsageError(`--admin-port ${adminPort} is the port the app listens on (--port): give the operational endpoints another port, or leave --admin-port out to serve them on the main one`);
  }
  const drainMs = integerOption(values, 'drain-ms', 0, 3600000)!;
  const workers = workerCount(values.workers);
  const scale = readScaleOut(values, env);
  if (role === 'jobs' && workers > 0) throw new UsageError('--role jobs runs no clients: it needs no --workers (run several jobs processes instead).');
  if (role === 'jobs' && scale.balancer) throw new UsageError('--role jobs serves no clients, so it cannot be a --balancer.');
  // Another process could never read the queue of a web process (nor enqueue for a jobs one): they would be silently idle.
  if (role !== 'all' && !env.MONGO_URL) {
    throw new UsageError(`--role ${role} needs MONGO_URL: web and jobs processes share the app's database, and the embedded store belongs to one process (a web process's queued jobs would never run). Set MONGO_URL, or leave --role at all.`);
  }
  const redisTimeoutMs = connectTimeoutMs(env);
  return {
    level: level as LogLevel,
    port,
    host,
    compression,
    role,
    jobs,
    serverOptions,
    adminPort,
    adminHost,
    drainMs,
    workers,
    scale,
    dataDir: String(values['data-dir']),
    fsync: values.fsync === true,
    redisTimeoutMs,
  };
}
export type StartSettings = ReturnType<typeof readStartSettings>;

/** Before anything is made or opened: the app file, the port, where the data goes, what must answer. */
export async function checkBeforeStart(appPath: string, settings: StartSettings, env: NodeJS.ProcessEnv): Promise<void> {
  const { port, host, workers, dataDir, adminPort, adminHost, scale } = settings;
  checkAppFile(appPath);
  await checkMongoUrls(env);
  checkLiveQuerySettings(env);
  await checkPort(port, host);
  if (!env.MONGO_URL && workers === 0) checkDataDir(dataDir);
  if (adminPort !== undefined) await checkPort(adminPort, adminHost, ADMIN_ADDRESS);
  if (scale.redisUrl && (scale.fanout || (scale.publicUrl && scale.discovery === 'redis'))) await checkRedis(scale.redisUrl, settings.redisTimeoutMs);
}

export async function runStart(parsed: Parsed, env: NodeJS.ProcessEnv = process.env): Promise<PerseidServer | Primary> {
  const appPath = onePositional(parsed, 'Missing the app module: perseid start <app-module>', 'app module');
  const settings = readStartSettings(parsed.values, env);
  const { port, host, compression, role, jobs, serverOptions, adminPort, adminHost, drainMs, workers, scale, dataDir } = settings;
  setLogLevel(settings.level);
  // A worker's lines, whichever part of it writes them, say which worker (two would otherwise log alike).
  if (isWorker()) setLogContext({ worker: env.PERSEID_WORKER_ID });
  const log = createLogger('perseid');
  exitOnUncaught(log);
  const id = processId();
  if (!isWorker()) await checkBeforeStart(appPath, settings, env);
  // Every process of a fan-out cluster (workers too) hears the bus itself.
  const fanout = scale.fanout && (isWorker() || workers === 0) ? await openFanout(scale, id, log) : undefined;
  const closeFanout = () => fanout?.bus.close();

  if (isWorker()) {
    // Forked by a primary: the same app, fed by the bus or by the primary's change feed, serving what it hands over.
    const feed = env.PERSEID_CHANGE_SOURCE === 'ipc' ? { link: primaryFeedLink(), name: env.PERSEID_MACHINE_FEED ?? 'change feed', kind: (env.PERSEID_MACHINE_FEED_KIND ?? 'none') as ChangeSourceKind } : undefined;
    setDefaultDatabaseOptions({ feed, fanout: fanout?.store });
    const setup = await loadAppModule(appPath);
    const database = await openAppDatabase(undefined);
    const server = await bootApp(setup, appPath, serverOptions, database);
    // As a single server stops: jobs stop alongside (running attempts may finish), then the database closes.
    let stopJobs = async () => undefined as void;
    const after = () => database.close().then(closeFanout);
    await serveAsWorker(server, {
      drain: (windowMs) => exitAfter(log, () => Promise.all([server.drain(windowMs), stopJobs()]).then(after)),
      close: () => exitAfter(log, () => Promise.all([server.close(), stopJobs()]).then(after)),
    });
    stopJobs = await startJobs(server, database, jobs, env, id, log);
    return server;
  }

  if (workers > 0) {
    const mongoUrl = env.MONGO_URL;
    if (!mongoUrl) {
      throw new UsageError('--workers needs MONGO_URL: the embedded store belongs to a single process. Run one process, or keep the data in MongoDB.');
    }
    // One change feed for the machine, shared with the workers (unless they hear the fan-out bus).
    const { openMongoStore } = await import('../data/mongo/store.js');
    const feedStore = scale.fanout
      ? undefined
      : await openMongoStore({
          url: mongoUrl,
          oplogUrl: env.MONGO_OPLOG_URL || undefined,
          changeSource: (env.PERSEID_CHANGE_SOURCE as ChangeSourceChoice | undefined) ?? 'auto',
        });
    const polling = feedStore?.changes.name === 'polling';
    const primary = new Primary({
      workers,
      workerModule: process.argv[1]!,
      workerArgs: process.argv.slice(2),
      // A polled database has no feed to share: each worker polls for itself.
      workerEnv: feedStore ? { ...env, PERSEID_CHANGE_SOURCE: polling ? 'poll' : 'ipc', PERSEID_MACHINE_FEED: feedStore.changes.name, PERSEID_MACHINE_FEED_KIND: feedStore.changes.kind } : env,
      feed: feedStore && !polling ? { changes: feedStore.changes, poke: (collection) => feedStore.poke(collection) } : undefined,
      role: role === 'web' ? 'web' : 'all',
      allowedOrigins: serverOptions.allowedOrigins ?? parseAllowedOrigins(''),
      forwardedCount: forwardedCountFromEnv(env),
      maxConnectionsPerAddress: serverOptions.maxConnectionsPerAddress,
      contentSecurityPolicy: serverOptions.contentSecurityPolicy,
      adminEndpoints: adminPort === undefined,
      log,
    });
    const bound = await listenOn(() => primary.listen(port, host), port, host);
    const onSignals = catchSignals(log);
    if (adminPort !== undefined) await serveAdmin((req, res) => primary.adminRequest(req, res), adminPort, adminHost, serverOptions.maxConnectionsPerAddress, log);
    const joined = scale.publicUrl ? await joinCluster(scale, id, primary, () => primary.load(), log, role) : undefined;
    const after = () => Promise.all([feedStore?.close(), joined?.close()]).then(() => undefined);
    const stopping = onSignals(
      () => primary.drain(drainMs).then(after),
      () => primary.close().then(after),
    );
    if (!stopping) log.info(`Perseid is running at ${shownUrl(bound.host, bound.port)}`, {
      app: appPath,
      workers,
      store: 'mongo',
      changes: feedStore ? feedStore.changes.name : 'the fan-out bus',
      cluster: joined?.membership.id,
    });
    return primary;
  }

  // The app loads before the database opens: an app that cannot load leaves no data directory behind.
  const embedded = !env.MONGO_URL;
  setDefaultDatabaseOptions({ dataDir, fsync: settings.fsync, fanout: fanout?.store });
  const setup = await loadAppModule(appPath);
  const database = await openAppDatabase(embedded ? dataDir : undefined);
  const server = await bootApp(setup, appPath, { ...serverOptions, adminEndpoints: adminPort === undefined }, database);
  const bound = await listenOn(() => server.listen(port, host), port, host);
  const onSignals = catchSignals(log);
  if (adminPort !== undefined) await serveAdmin((req, res) => server.adminRequest(req, res), adminPort, adminHost, serverOptions.maxConnectionsPerAddress, log);
  const monitor = new LoadMonitor(() => server.sessionCount);
  const joined = scale.publicUrl ? await joinCluster(scale, id, server, () => monitor.sample(), log, role) : undefined;
  if (!joined) monitor.stop();
  const stopJobs = await startJobs(server, database, jobs, env, id, log);
  // Jobs stop alongside the drain (running attempts may finish), before the database closes.
  const after = () => Promise.all([database.close(), joined?.close()]).then(closeFanout);
  const stopping = onSignals(
    () => Promise.all([server.drain(drainMs), stopJobs()]).then(after),
    () => Promise.all([server.close(), stopJobs()]).then(after),
    () => Promise.all([server.close({ restarting: true }), stopJobs()]).then(after),
  );
  if (!stopping) log.info(`Perseid is running at ${shownUrl(bound.host, bound.port)}`, {
    app: appPath,
    store: database.driver.kind,
    dataDir: database.driver.kind === 'embedded' ? dataDir : undefined,
    compression: compression ? compression.threshold : 'off',
    fanout: fanout ? 'redis' : undefined,
    cluster: joined?.membership.id,
    role,
  });
  return server;
}
