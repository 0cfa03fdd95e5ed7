/** `perseid start <app>`: open the database, load the app module, serve it. */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { openDatabase, setDefaultDatabase } from '../data/database.js';
import { createLogger, setLogLevel, type LogLevel } from '../log.js';
import { createServer, DEFAULT_COMPRESSION, type PerseidServer } from '../server/app.js';
import type { CompressionOptions } from '../transport/frames.js';
import { integerOption, UsageError, type CommandSpec, type Parsed } from './args.js';

export const startCommand: CommandSpec = {
  name: 'start',
  summary: 'Run a Perseid app: serve its methods and publications over DDP (WebSocket and SockJS) and its static files over HTTP.',
  usage: 'perseid start <app-module> [options]',
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

export async function runStart(parsed: Parsed, env: NodeJS.ProcessEnv = process.env): Promise<PerseidServer> {
  const [appPath] = parsed.positionals;
  if (!appPath) throw new UsageError('Missing the app module: perseid start <app-module>');
  const { values } = parsed;
  const level = String(values['log-level']);
  if (!LEVELS.includes(level)) throw new UsageError(`--log-level must be one of ${LEVELS.join(', ')}`);
  setLogLevel(level as LogLevel);
  const log = createLogger('perseid');
  const port = integerOption(values, 'port', 0, 65535)!;
  const host = String(values.host);
  const compression = compressionOption(values.compression as string | undefined, env);

  const database = await openDatabase({ dataDir: String(values['data-dir']), fsync: values.fsync === true });
  setDefaultDatabase(database);
  const server = createServer({ compression });

  const moduleUrl = pathToFileURL(resolve(appPath)).href;
  const app = (await import(moduleUrl)) as { default?: unknown };
  if (typeof app.default !== 'function') {
    throw new UsageError(`${appPath} has no default export function (server) => { ... }`);
  }
  await (app.default as (server: PerseidServer) => unknown)(server);

  const { port: boundPort, host: boundHost } = await server.listen(port, host);
  const shownHost = boundHost === '0.0.0.0' || boundHost === '::' ? '127.0.0.1' : boundHost.includes(':') ? `[${boundHost}]` : boundHost;
  log.info(`Perseid is running at http://${shownHost}:${boundPort}`, {
    app: appPath,
    store: database.driver.kind,
    dataDir: database.driver.kind === 'embedded' ? String(values['data-dir']) : undefined,
    compression: compression ? compression.threshold : 'off',
  });

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) {
      log.warn('second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    log.info('shutting down', { signal });
    void server
      .close()
      .then(() => database.close())
      .then(
        () => process.exit(0),
        (error: unknown) => {
          log.error('shutdown failed', { error });
          process.exit(1);
        },
      );
  };
  process.once('SIGINT', () => shutdown('SIGINT'));
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  return server;
}
