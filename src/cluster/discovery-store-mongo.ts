/**
 * Discovery in the app's MongoDB, as meteorhacks:cluster did: nothing else to
 * run. Siblings: `discovery-store-redis.ts`, `discovery-store-memory.ts`.
 */
import type { Collection as MongoCollectionType, Db } from 'mongodb';
import type { DiscoveryStore, ServerEntry } from './discovery-store.js';

/**
 * `seenAt` is the database's clock at the last announcement. Older servers only set `updatedAt` (their own clock),
 * so their entries are aged by this server's clock, as before.
 */
type StoredEntry = Omit<ServerEntry, 'id'> & { _id: string; seenAt?: Date };

/**
 * A document per server in the app's database; stale ones are filtered on read and swept on write. Ages are
 * measured on the database's clock, as Redis's expiry is: the servers' clocks may disagree by more than the time
 * to live (one ahead would see no other server and one behind would stay listed long after it died).
 */
export class MongoDiscoveryStore implements DiscoveryStore {
  constructor(
    /** The database, on a client that may have to (re)connect first (see data/mongo/reconnecting-client.ts). */
    private readonly db: () => Promise<Db>,
    private readonly name = 'perseid_servers',
  ) {}

  async put(entry: ServerEntry, ttlMs: number): Promise<void> {
    const { id, ...rest } = entry;
    const collection = await this.collection();
    await collection.updateOne({ _id: id }, { $set: rest, $currentDate: { seenAt: true } }, { upsert: true });
    await collection.deleteMany(await this.aged('$lt', 10 * ttlMs));
  }

  async remove(id: string): Promise<void> {
    await (await this.collection()).deleteOne({ _id: id });
  }

  async list(ttlMs: number): Promise<ServerEntry[]> {
    const docs = await (await this.collection()).find(await this.aged('$gt', ttlMs)).toArray();
    return docs.map(({ _id, seenAt: _seenAt, ...entry }) => ({ ...entry, id: _id }));
  }

  /** Entries announced before (`$lt`) or since (`$gt`) `ageMs` ago, by the database's clock (by this server's for an older server's entry). */
  private async aged(op: '$lt' | '$gt', ageMs: number) {
    const { localTime } = await (await this.db()).command({ hello: 1 });
    const now = localTime instanceof Date ? localTime.getTime() : Date.now();
    return { $or: [{ seenAt: { [op]: new Date(now - ageMs) } }, { seenAt: { $exists: false }, updatedAt: { [op]: Date.now() - ageMs } }] };
  }

  private async collection(): Promise<MongoCollectionType<StoredEntry>> {
    return (await this.db()).collection<StoredEntry>(this.name);
  }
}
