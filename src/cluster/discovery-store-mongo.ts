/**
 * Discovery in the app's MongoDB, as meteorhacks:cluster did: nothing else to
 * run. Siblings: `discovery-store-redis.ts`, `discovery-store-memory.ts`.
 */
import type { Collection as MongoCollectionType, Db } from 'mongodb';
import type { DiscoveryStore, ServerEntry } from './discovery-store.js';

type StoredEntry = Omit<ServerEntry, 'id'> & { _id: string };

/** A document per server in the app's database; stale ones are filtered on read and swept on write. */
export class MongoDiscoveryStore implements DiscoveryStore {
  constructor(
    /** The database, on a client that may have to (re)connect first (see data/mongo/reconnecting-client.ts). */
    private readonly db: () => Promise<Db>,
    private readonly name = 'perseid_servers',
  ) {}

  async put(entry: ServerEntry, ttlMs: number): Promise<void> {
    const { id, ...rest } = entry;
    const collection = await this.collection();
    await collection.replaceOne({ _id: id }, rest, { upsert: true });
    await collection.deleteMany({ updatedAt: { $lt: Date.now() - 10 * ttlMs } });
  }

  async remove(id: string): Promise<void> {
    await (await this.collection()).deleteOne({ _id: id });
  }

  async list(ttlMs: number): Promise<ServerEntry[]> {
    const docs = await (await this.collection()).find({ updatedAt: { $gt: Date.now() - ttlMs } }).toArray();
    return docs.map(({ _id, ...entry }) => ({ ...entry, id: _id }));
  }

  private async collection(): Promise<MongoCollectionType<StoredEntry>> {
    return (await this.db()).collection<StoredEntry>(this.name);
  }
}
