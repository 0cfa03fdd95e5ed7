/**
 * What the servers of a fan-out cluster tell the relay: which collections some
 * server has live queries on (the relay follows only those). Implementations:
 * `watched-collections-redis.ts` (fan-out needs Redis anyway), and
 * `watched-collections-memory.ts` for servers sharing one process.
 */
export interface WatchedCollections {
  announce(collections: readonly string[]): Promise<void>;
  list(): Promise<string[]>;
}
