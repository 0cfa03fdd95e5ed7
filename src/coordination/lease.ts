/**
 * The lease seam: a named lease one holder has at a time, for as long as it
 * renews it. Whoever acts on the lease's behalf (the relay of outside writes, a
 * job runner) re-acquires before the time to live runs out and stops acting as
 * soon as an acquire says no.
 *
 * Each change of holder hands out a larger fencing token; renewals keep it. A
 * holder that stalled past its time to live still believes it holds the token
 * it had, so writes it makes on the lease's behalf carry the token and are
 * refused when a newer one was handed out since (see `jobs/`).
 *
 * Implementations, side by side: `lease-memory.ts` (one process, tests),
 * `lease-redis.ts` (Redis, atomic scripts), `lease-database.ts` (the app's own
 * database, through the storage driver, so the embedded store or MongoDB).
 */

export interface LeaseOptions {
  /** What is leased; one holder per name. */
  name: string;
  /** Who asks: unique per process (a server id). */
  holder: string;
  /** How long the lease lasts after each acquire, in ms. */
  ttlMs: number;
}

export interface Lease {
  readonly name: string;
  /**
   * Takes the lease, or renews it when this holder has it. Resolves with the
   * fencing token, or undefined when another holder has the lease.
   */
  acquire(): Promise<number | undefined>;
  /** Gives the lease up, if this holder still has it (a lease taken over since is left alone). */
  release(): Promise<void>;
}

/** Makes leases of one kind (memory, Redis, database) for any name and holder. */
export type LeaseFactory = (options: LeaseOptions) => Lease;
