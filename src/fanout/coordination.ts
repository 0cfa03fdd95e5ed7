/** What servers agree on through the bus's store (Redis): who relays the database's changes, and what the cluster watches. */

/** A lease only one server holds at a time, renewed by acquiring again before it lapses. */
export interface Lease {
  /** Takes the lease, or keeps it if this server holds it; false when another server does. */
  acquire(): Promise<boolean>;
  release(): Promise<void>;
}

/** The collections some server of the cluster has live queries on. */
export interface WatchedCollections {
  announce(collections: readonly string[]): Promise<void>;
  list(): Promise<string[]>;
}
