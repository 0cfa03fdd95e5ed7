/**
 * `perseid start`'s many-server options: joining a cluster (discovery and
 * balancing) and cross-server fan-out over Redis, turned into the objects that
 * do them. Each process of a cluster calls this (a primary, its workers, or a
 * single server). Redis and MongoDB clients load only here, when asked for:
 * a single server on the embedded store never pays for them.
 */
import type { DiscoveryStore } from '../cluster/discovery-store.js';
import type { LoadFigures } from '../cluster/load-monitor.js';
import { ClusterMembership } from '../cluster/membership.js';
import type { ConnectionRouter } from '../server/connection-router.js';
import type { MongoStoreOptions } from '../data/mongo/store.js';
import type { RedisBus } from '../fanout/bus-redis.js';
import { redactedUrl, type Logger } from '../log.js';
import { integerOption, optionName, UsageError, type OptionSpec, type Parsed } from './args.js';
import { redisKeyPrefix } from '../redis-keys.js';

export const scaleOutOptions: Record<string, OptionSpec> = {
  'public-url': {
    type: 'string',
    env: 'PERSEID_PUBLIC_URL',
    value: '<url>',
    help: 'Join a cluster of servers, announcing the URL clients reach this one at (needs MONGO_URL)',
  },
  'internal-url': {
    type: 'string',
    env: 'PERSEID_INTERNAL_URL',
    value: '<url>',
    help: 'Where other servers pass raw WebSocket connections to this one (default: the public URL when it is http://)',
  },
  balancer: {
    type: 'boolean',
    env: 'PERSEID_BALANCER',
    help: 'Send each new client to the least loaded server of the cluster (set it on every server, or only on those clients connect to)',
  },
  discovery: {
    type: 'string',
    env: 'PERSEID_DISCOVERY',
    value: '<redis|mongo>',
    help: 'Where servers register: Redis (REDIS_URL) or the app\'s MongoDB (default: redis when REDIS_URL is set)',
  },
  'discovery-interval-ms': {
    type: 'string',
    env: 'PERSEID_DISCOVERY_INTERVAL_MS',
    default: '2000',
    value: '<ms>',
    help: 'How often a server announces its load; a server silent for 3 intervals drops out',
  },
  fanout: {
    type: 'string',
    env: 'PERSEID_FANOUT',
    value: '<redis|off>',
    help: 'Share changes between servers over Redis pub/sub instead of each following the database (default: redis when REDIS_URL and MONGO_URL are set)',
  },
  relay: {
    type: 'string',
    env: 'PERSEID_RELAY',
    default: 'on',
    value: '<on|off>',
    help: 'With fan-out: one elected server relays writes made outside Perseid from the database; off when every write goes through Perseid (each change then travels once, not twice)',
  },
};

export interface ScaleOut {
  publicUrl?: string;
  internalUrl?: string;
  balancer: boolean;
  discovery: 'redis' | 'mongo';
  intervalMs: number;
  fanout: boolean;
  /** With fan-out: whether writes made outside Perseid are relayed. */
  relay: boolean;
  redisUrl?: string;
  mongoUrl?: string;
}

function checkUrl(values: Parsed['values'], name: string): string | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  try {
    const url = new URL(String(raw));
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http');
    return url.href;
  } catch {
    throw new UsageError(`${optionName(values, name)} must be an http:// or https:// URL (got ${String(raw)})`);
  }
}

export function readScaleOut(values: Parsed['values'], env: NodeJS.ProcessEnv): ScaleOut {
  const redisUrl = env.REDIS_URL || undefined;
  const mongoUrl = env.MONGO_URL || undefined;
  const publicUrl = checkUrl(values, 'public-url');
  const internalUrl = checkUrl(values, 'internal-url');
  const balancer = values.balancer === true;
  const discovery = String(values.discovery ?? (redisUrl ? 'redis' : 'mongo'));
  if (discovery !== 'redis' && discovery !== 'mongo') throw new UsageError(`--discovery must be redis or mongo (got ${discovery})`);
  const fanoutRaw = String(values.fanout ?? (redisUrl && mongoUrl ? 'redis' : 'off'));
  if (fanoutRaw !== 'redis' && fanoutRaw !== 'off') throw new UsageError(`--fanout must be redis or off (got ${fanoutRaw})`);
  const fanout = fanoutRaw === 'redis';
  if ((publicUrl || balancer || fanout) && !mongoUrl) {
    throw new UsageError('Servers of a cluster share one database: --public-url, --balancer and --fanout need MONGO_URL (the embedded store belongs to one process).');
  }
  if (balancer && !publicUrl) throw new UsageError('--balancer needs --public-url: a balancer is a member of the cluster it balances.');
  if (publicUrl && discovery === 'redis' && !redisUrl) throw new UsageError('Discovery in Redis needs REDIS_URL (or use --discovery mongo).');
  if (fanout && !redisUrl) throw new UsageError('--fanout redis needs REDIS_URL.');
  const relay = String(values.relay);
  if (relay !== 'on' && relay !== 'off') throw new UsageError(`--relay must be on or off (got ${relay})`);
  return {
    publicUrl,
    internalUrl,
    balancer,
    discovery,
    intervalMs: integerOption(values, 'discovery-interval-ms', 100, 600000)!,
    fanout,
    relay: relay === 'on',
    redisUrl,
    mongoUrl,
  };
}

/** Connects to Redis for fan-out; the store options a MongoStore needs to use it. */
export async function openFanout(config: ScaleOut, id: string, log: Logger): Promise<{ bus: RedisBus; store: NonNullable<MongoStoreOptions['fanout']> }> {
  const [{ RedisBus }, { RedisLease }, { RedisWatchedCollections }] = await Promise.all([
    import('../fanout/bus-redis.js'),
    import('../coordination/lease-redis.js'),
    import('../fanout/watched-collections-redis.js'),
  ]);
  const bus = new RedisBus(config.redisUrl!, log.child('fanout'));
  const waiting = setTimeout(() => log.warn('waiting for Redis', { url: redactedUrl(config.redisUrl!) }), 3000);
  await bus.ready().finally(() => clearTimeout(waiting));
  const prefix = redisKeyPrefix(config.mongoUrl);
  const relay = config.relay
    ? { lease: new RedisLease(bus.commands, { name: 'relay', holder: id, ttlMs: 10000 }, prefix), watched: new RedisWatchedCollections(bus.commands, `${prefix}watched`, 10000) }
    : undefined;
  return { bus, store: { bus, serverId: id, relay } };
}

/**
 * The registry the servers of a cluster share: in Redis (namespaced by the database's name) or in the app's
 * MongoDB. Either outlives its database being down, at start too: the autoscaler reads it for weeks.
 */
export async function openDiscoveryStore(config: Pick<ScaleOut, 'discovery' | 'redisUrl' | 'mongoUrl'>, log: Logger): Promise<{ store: DiscoveryStore; close(): Promise<void> }> {
  if (config.discovery === 'mongo') {
    const [{ ReconnectingClient }, { MongoDiscoveryStore }] = await Promise.all([import('../data/mongo/reconnecting-client.js'), import('../cluster/discovery-store-mongo.js')]);
    const client = new ReconnectingClient(config.mongoUrl!);
    return { store: new MongoDiscoveryStore(() => client.db()), close: () => client.close() };
  }
  const [{ redisClient }, { RedisDiscoveryStore }] = await Promise.all([import('../redis-client.js'), import('../cluster/discovery-store-redis.js')]);
  const redis = redisClient(config.redisUrl!, { maxRetriesPerRequest: 2 }, log);
  return { store: new RedisDiscoveryStore(redis, `${redisKeyPrefix(config.mongoUrl)}servers:`), close: async () => redis.disconnect() };
}

export interface Joined {
  membership: ClusterMembership;
  close(): Promise<void>;
}

/** Registers `front` (a server or a workers' primary) in the cluster; a balancer starts routing new clients. */
export async function joinCluster(
  config: ScaleOut,
  id: string,
  front: { routeConnections(router: ConnectionRouter): unknown; onDrain(hook: () => Promise<void>): unknown; readonly connectionCount: number },
  load: () => LoadFigures,
  log: Logger,
  role = 'all',
): Promise<Joined> {
  const { store, close } = await openDiscoveryStore(config, log.child('discovery'));
  const membership = new ClusterMembership(
    { id, url: config.publicUrl!, internalUrl: config.internalUrl, balancer: config.balancer, role, store, intervalMs: config.intervalMs, log: log.child('cluster') },
    load,
    () => front.connectionCount,
  );
  await membership.start();
  front.routeConnections(membership);
  front.onDrain(() => membership.leave());
  return {
    membership,
    close: async () => {
      await membership.leave();
      await close();
    },
  };
}
