/**
 * How servers find each other: each announces its public URL and its load
 * every `intervalMs`, with a time to live; an entry not renewed within it (a
 * dead server) drops out. Stores: Redis (REDIS_URL), the app's MongoDB (no
 * extra infrastructure, as meteorhacks:cluster did), or memory (one process).
 */
import type { Collection as MongoCollectionType, Db } from 'mongodb';
import type { Redis } from 'ioredis';
import type { Logger } from '../log.js';
import type { LoadFigures } from './load-monitor.js';

export interface ServerEntry extends LoadFigures {
  id: string;
  /** Where clients reach it, e.g. https://eu1.example.com */
  url: string;
  /** Where other servers reach it to pass on raw WebSocket connections (http://host:port), if they may. */
  internalUrl?: string;
  /** Whether it sends new clients to the least loaded server. */
  balancer: boolean;
  /** ms since the epoch, set when announced. */
  updatedAt: number;
}

/** What a server says about itself at each announcement. */
export type SelfDescription = Omit<ServerEntry, 'id' | 'updatedAt'>;

export interface DiscoveryStore {
  put(entry: ServerEntry, ttlMs: number): Promise<void>;
  remove(id: string): Promise<void>;
  /** Entries announced within their time to live. */
  list(ttlMs: number): Promise<ServerEntry[]>;
}

export class MemoryDiscoveryStore implements DiscoveryStore {
  private readonly entries = new Map<string, ServerEntry>();

  async put(entry: ServerEntry): Promise<void> {
    this.entries.set(entry.id, entry);
  }

  async remove(id: string): Promise<void> {
    this.entries.delete(id);
  }

  async list(ttlMs: number): Promise<ServerEntry[]> {
    const cutoff = Date.now() - ttlMs;
    return [...this.entries.values()].filter((e) => e.updatedAt > cutoff);
  }
}

/** One key per server, expiring by itself. */
export class RedisDiscoveryStore implements DiscoveryStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  async put(entry: ServerEntry, ttlMs: number): Promise<void> {
    await this.redis.set(`${this.prefix}${entry.id}`, JSON.stringify(entry), 'PX', ttlMs);
  }

  async remove(id: string): Promise<void> {
    await this.redis.del(`${this.prefix}${id}`);
  }

  async list(): Promise<ServerEntry[]> {
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, found] = await this.redis.scan(cursor, 'MATCH', `${this.prefix}*`, 'COUNT', 100);
      cursor = next;
      keys.push(...found);
    } while (cursor !== '0');
    if (keys.length === 0) return [];
    return (await this.redis.mget(keys)).filter((v): v is string => v !== null).map((v) => JSON.parse(v) as ServerEntry);
  }
}

type StoredEntry = Omit<ServerEntry, 'id'> & { _id: string };

/** A document per server in the app's database; stale ones are filtered on read and swept on write. */
export class MongoDiscoveryStore implements DiscoveryStore {
  private readonly collection: MongoCollectionType<StoredEntry>;

  constructor(db: Db, name = 'perseid_servers') {
    this.collection = db.collection(name);
  }

  async put(entry: ServerEntry, ttlMs: number): Promise<void> {
    const { id, ...rest } = entry;
    await this.collection.replaceOne({ _id: id }, rest, { upsert: true });
    await this.collection.deleteMany({ updatedAt: { $lt: Date.now() - 10 * ttlMs } });
  }

  async remove(id: string): Promise<void> {
    await this.collection.deleteOne({ _id: id });
  }

  async list(ttlMs: number): Promise<ServerEntry[]> {
    const docs = await this.collection.find({ updatedAt: { $gt: Date.now() - ttlMs } }).toArray();
    return docs.map(({ _id, ...entry }) => ({ ...entry, id: _id }));
  }
}

export interface DiscoveryOptions {
  intervalMs?: number;
  ttlMs?: number;
  log: Logger;
}

/** Announces this server and keeps the list of live ones, both on a timer. */
export class Discovery {
  private known: ServerEntry[] = [];
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> = Promise.resolve();
  private left = false;
  readonly intervalMs: number;
  readonly ttlMs: number;

  constructor(
    private readonly store: DiscoveryStore,
    readonly id: string,
    private readonly describe: () => SelfDescription,
    private readonly options: DiscoveryOptions,
  ) {
    this.intervalMs = options.intervalMs ?? 2000;
    this.ttlMs = options.ttlMs ?? 3 * this.intervalMs;
  }

  async start(): Promise<void> {
    await (this.ticking = this.tick());
    this.timer = setInterval(() => {
      this.ticking = this.tick();
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Live servers, as of the last refresh (this one included until it leaves). */
  servers(): readonly ServerEntry[] {
    return this.known;
  }

  /** Stops announcing and removes this server's entry (drain: no new clients are sent here). */
  async leave(): Promise<void> {
    this.left = true;
    clearInterval(this.timer);
    await this.ticking;
    this.known = this.known.filter((entry) => entry.id !== this.id);
    await this.store.remove(this.id).catch((error: Error) => this.options.log.warn('could not leave the registry', { error: error.message }));
  }

  private async tick(): Promise<void> {
    try {
      await this.store.put({ ...this.describe(), id: this.id, updatedAt: Date.now() }, this.ttlMs);
      const servers = await this.store.list(this.ttlMs);
      if (this.left) return;
      this.known = servers;
    } catch (error) {
      this.options.log.warn('discovery update failed', { error: (error as Error).message });
    }
  }
}
