/**
 * `perseid start`'s process role and the jobs engine it starts: `web` serves
 * clients and runs no jobs, `jobs` runs jobs and serves no clients, `all`
 * (one process) does both. The lease that keeps each due run to one process:
 * Redis when REDIS_URL is set, else the app's MongoDB, else (the embedded
 * store, one process) memory.
 */
import type { Database } from '../collections/database.js';
import { DatabaseLease, LEASES_COLLECTION } from '../coordination/lease-database.js';
import { MemoryLeases } from '../coordination/lease-memory.js';
import type { LeaseFactory } from '../coordination/lease.js';
import { RedisLease } from '../coordination/lease-redis.js';
import { redisClient } from '../redis-client.js';
import { redisKeyPrefix } from '../redis-keys.js';
import type { Logger } from '../log.js';
import { SERVER_ROLES, type PerseidServer, type ServerRole } from '../server/app.js';
import { integerOption, UsageError, type OptionSpec, type Parsed } from './args.js';

export const roleOptions: Record<string, OptionSpec> = {
  role: {
    type: 'string',
    env: 'PERSEID_ROLE',
    default: 'all',
    value: '<web|jobs|all>',
    help: 'web: serve clients, run no jobs; jobs: run jobs, serve no DDP clients (still in discovery and metrics); all: both',
  },
  'jobs-lease-ms': {
    type: 'string',
    env: 'PERSEID_JOBS_LEASE_MS',
    default: '30000',
    value: '<ms>',
    help: 'A jobs process silent this long is taken for dead and its runs are retried elsewhere',
  },
  'jobs-poll-ms': { type: 'string', env: 'PERSEID_JOBS_POLL_MS', default: '1000', value: '<ms>', help: 'How often a jobs process reads the queue' },
  'jobs-concurrency': { type: 'string', env: 'PERSEID_JOBS_CONCURRENCY', default: '4', value: '<n>', help: 'Job attempts a process runs at once' },
};

export function readRole(values: Parsed['values']): ServerRole {
  const role = String(values.role);
  if (!SERVER_ROLES.includes(role as ServerRole)) throw new UsageError(`--role must be web, jobs or all (got ${role})`);
  return role as ServerRole;
}

export interface JobsSettings {
  leaseTtlMs: number;
  pollMs: number;
  concurrency: number;
}

/** The jobs engine's settings, read at start-up whether or not the app defines jobs, so a bad one is refused either way. */
export function readJobsSettings(values: Parsed['values']): JobsSettings {
  return {
    leaseTtlMs: integerOption(values, 'jobs-lease-ms', 300, 3_600_000)!,
    pollMs: integerOption(values, 'jobs-poll-ms', 10, 3_600_000)!,
    concurrency: integerOption(values, 'jobs-concurrency', 1, 1000)!,
  };
}

/** Starts the jobs engine of `server` unless its role is web; resolves with how to stop it. */
export async function startJobs(
  server: PerseidServer,
  database: Database,
  settings: JobsSettings,
  env: NodeJS.ProcessEnv,
  holder: string,
  log: Logger,
): Promise<() => Promise<void>> {
  // An app that defines no jobs needs no engine (nor its queries every poll).
  if (server.jobs.names.length === 0) return async () => undefined;
  if (server.role === 'web') {
    // A web process never runs jobs; its dashboard shows them as the jobs processes write them in the shared database.
    server.jobs.showWithoutRunning(database);
    return () => server.jobs.stop();
  }
  let leases: LeaseFactory;
  let closeLeases = async () => undefined as void;
  let kind: string;
  if (database.driver.kind === 'embedded') {
    // The embedded store belongs to one process: nobody else to agree with.
    const table = new MemoryLeases();
    leases = (options) => table.lease(options);
    kind = 'memory';
  } else if (env.REDIS_URL) {
    const redis = redisClient(env.REDIS_URL, { maxRetriesPerRequest: 2 }, log.child('leases'));
    const prefix = redisKeyPrefix(env.MONGO_URL);
    leases = (options) => new RedisLease(redis, options, prefix);
    closeLeases = async () => redis.disconnect();
    kind = 'redis';
  } else {
    const collection = database.driver.collection(LEASES_COLLECTION);
    leases = (options) => new DatabaseLease(collection, options);
    kind = 'database';
  }
  await server.jobs.start({ database, leases, holder, ...settings, role: server.role, log: log.child('jobs') });
  log.info('jobs engine started', { role: server.role, leases: kind, runner: server.jobs.runner });
  return async () => {
    await server.jobs.stop();
    await closeLeases();
  };
}
