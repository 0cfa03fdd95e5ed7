/**
 * Checks `perseid start` makes before it creates anything: that the port can
 * be bound, that the data directory can be made and written, that MongoDB's
 * URLs parse and its change source can be had, that Redis answers. Each
 * failure is a StartupError saying what to change.
 */
import { accessSync, constants, statSync, type Stats } from 'node:fs';
import { createServer, isIP } from 'node:net';
import { dirname, resolve } from 'node:path';
import { withDeadline } from '../deadline.js';
import { redactedUrl } from '../log.js';
import { StartupError } from './startup-error.js';

/** The flags (and environment variables) that set an address `perseid start` listens on, named in what to change. */
export interface AddressFlags {
  port: string;
  host: string;
}
export const MAIN_ADDRESS: AddressFlags = { port: '--port or PORT', host: '--host or HOST' };
export const ADMIN_ADDRESS: AddressFlags = { port: '--admin-port or PERSEID_ADMIN_PORT', host: '--admin-host or PERSEID_ADMIN_HOST' };

/** Looks like an IP address (digits and dots, or a colon) without being one: not a host name to resolve. */
function badIpAddress(host: string): boolean {
  return isIP(host) === 0 && (/^[\d.]+$/.test(host) || host.includes(':'));
}

/** One line for an error of `listen(port, host)`, or undefined when it is not one a person can fix. */
export function listenFailure(error: NodeJS.ErrnoException, port: number, host: string, flags: AddressFlags = MAIN_ADDRESS): StartupError | undefined {
  switch (error.code) {
    case 'EADDRINUSE':
      return new StartupError(`port ${port} on ${host} is already in use (another server?): stop it, or choose another port with ${flags.port}`);
    case 'EADDRNOTAVAIL':
      return new StartupError(`${host} is not an address of this machine: use 127.0.0.1, 0.0.0.0 (every interface) or one of its own addresses with ${flags.host}`);
    case 'EACCES':
      return new StartupError(`port ${port} needs privileges this process does not have: choose a port above 1023 with ${flags.port}`);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      if (badIpAddress(host)) return new StartupError(`${host} is not a valid IP address: give one such as 127.0.0.1 or 0.0.0.0 (every interface) with ${flags.host}`);
      return new StartupError(`cannot resolve the host name ${host}: give an IP address with ${flags.host}`);
    default:
      return undefined;
  }
}

/** Listens, turning a port in use or an address not of this machine into one line. */
export async function listenOn<T>(listen: () => Promise<T>, port: number, host: string, flags: AddressFlags = MAIN_ADDRESS): Promise<T> {
  try {
    return await listen();
  } catch (error) {
    throw listenFailure(error as NodeJS.ErrnoException, port, host, flags) ?? error;
  }
}

/** Binds and releases `port` on `host`, so a taken port is reported before the data directory is made. */
export async function checkPort(port: number, host: string, flags: AddressFlags = MAIN_ADDRESS): Promise<void> {
  // Port 0 too: the host may not be an address of this machine.
  await new Promise<void>((resolvePort, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => reject(listenFailure(error, port, host, flags) ?? error));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolvePort()));
  });
}

/** The path's stat, or undefined when nothing is there (or a file stands where a parent directory should). */
function statOf(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw error;
  }
}

/** The directory itself if it exists, else its nearest existing ancestor (which must be a directory we may write in). */
export function checkDataDir(dir: string): void {
  const path = resolve(dir);
  const remedy = 'choose another with --data-dir or PERSEID_DATA_DIR';
  const stat = statOf(path);
  if (stat && !stat.isDirectory()) throw new StartupError(`the data directory ${dir} is a file, not a directory: remove it, or ${remedy}`);
  let existing = path;
  while (!statOf(existing)) existing = dirname(existing);
  if (!statOf(existing)!.isDirectory()) throw new StartupError(`the data directory ${dir} cannot be created: ${existing} is a file; ${remedy}`);
  try {
    accessSync(existing, constants.W_OK | constants.X_OK);
  } catch (error) {
    // Permissions do not help on a read-only mount (EROFS), whoever the user.
    const why = (error as NodeJS.ErrnoException).code === 'EROFS' ? 'is on a read-only file system' : 'is not writable by this user';
    const fix = (error as NodeJS.ErrnoException).code === 'EROFS' ? 'mount it read-write' : 'fix its permissions';
    throw new StartupError(
      existing === path
        ? `the data directory ${dir} ${why}: ${fix}, or ${remedy}`
        : `the data directory ${dir} cannot be created: ${existing} ${why}; ${remedy}`,
    );
  }
}

/** MONGO_URL and MONGO_OPLOG_URL, when set, must be MongoDB connection strings: the driver's parse error, said as what to fix. */
export async function checkMongoUrls(env: NodeJS.ProcessEnv): Promise<void> {
  const { MongoClient } = await import('mongodb');
  for (const name of ['MONGO_URL', 'MONGO_OPLOG_URL']) {
    const url = env[name];
    if (!url) continue;
    try {
      // The constructor parses the string and its options; nothing connects before connect().
      void new MongoClient(url);
    } catch (error) {
      const reason = (error as Error).message.split('\n')[0]!.replace(/\.$/, '');
      throw new StartupError(`${name} is not a valid MongoDB connection string (${reason}): fix it; the form is mongodb://host:27017/database`, error);
    }
  }
}

/**
 * How live queries follow MongoDB: PERSEID_CHANGE_SOURCE one of the choices a person has (the oplog only with
 * its URL), and the tuning variables values the store reads as they are meant; misread, they fell back to defaults.
 */
export function checkLiveQuerySettings(env: NodeJS.ProcessEnv): void {
  for (const name of ['PERSEID_POLL_INTERVAL_MS', 'PERSEID_MONGO_TIMEOUT_MS']) {
    const value = env[name];
    if (value && !/^[1-9]\d*$/.test(value.trim())) throw new StartupError(`${name} must be a number of milliseconds, 1 or more (got ${value})`);
  }
  if (env.PERSEID_ROUTE_CHANGES && !['on', 'off'].includes(env.PERSEID_ROUTE_CHANGES)) {
    throw new StartupError(`PERSEID_ROUTE_CHANGES must be on or off (got ${env.PERSEID_ROUTE_CHANGES})`);
  }
  const choice = env.PERSEID_CHANGE_SOURCE;
  if (choice === undefined || choice === '') return;
  if (!['auto', 'change-stream', 'oplog', 'poll'].includes(choice)) {
    throw new StartupError(`PERSEID_CHANGE_SOURCE must be auto, change-stream, oplog or poll (got ${choice})`);
  }
  if (choice === 'oplog' && env.MONGO_URL && !env.MONGO_OPLOG_URL) {
    throw new StartupError("PERSEID_CHANGE_SOURCE=oplog needs MONGO_OPLOG_URL (the replica set's local database): set it, or choose change-stream, poll or auto");
  }
}

/** Connects to Redis once and pings it, failing after `timeoutMs` with what the connection last said. */
export async function checkRedis(url: string, timeoutMs: number): Promise<void> {
  const { Redis } = await import('ioredis');
  let last = 'no answer';
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: timeoutMs, retryStrategy: () => 200 });
  redis.on('error', (error: Error) => void (last = error.message));
  try {
    await withDeadline(redis.connect().then(() => redis.ping()), timeoutMs, () => new Error(last));
  } catch (error) {
    // The connection's own error (ECONNREFUSED, ENOTFOUND) says more than the rejection ("Connection is closed").
    const reason = (last !== 'no answer' ? last : (error as Error).message).replace(/\.$/, '');
    throw new StartupError(`cannot reach Redis at ${redactedUrl(url)} within ${timeoutMs} ms (${reason}): start it, or fix REDIS_URL`);
  } finally {
    redis.disconnect();
  }
}
