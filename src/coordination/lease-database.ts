/**
 * Leases in the app's own database, through the storage driver (the embedded
 * store or MongoDB): for clusters without Redis. One document per lease,
 * `{_id: name, holder, token, expiresAt}`. Renewing is an update whose selector
 * says "still mine"; taking over is an update whose selector says "expired";
 * the first taker creates the document, and a racing creator loses on the
 * duplicate `_id`. Each write is a single-document conditional update, atomic
 * on both drivers. Expiry is judged on the database's clock (read from a
 * document it stamps with $currentDate), as Redis judges its own keys': the
 * processes' clocks may disagree by more than a lease, and one ahead would take
 * live holders' leases. `lease-memory.ts` serves one process.
 */
import { DuplicateKeyError, type CollectionDriver } from '../data/driver.js';
import type { Lease, LeaseOptions } from './lease.js';

export const LEASES_COLLECTION = 'perseid_leases';
/** The document whose `at` the database sets to its own time at each acquire, for every lease of the collection. */
const CLOCK_ID = '~clock';

function isDuplicateKey(error: unknown): boolean {
  return error instanceof DuplicateKeyError || (error as { code?: unknown }).code === 11000;
}

export class DatabaseLease implements Lease {
  /** The token this holder was given when it took the lease (kept across renewals). */
  private token: number | undefined;

  constructor(
    private readonly collection: CollectionDriver,
    private readonly options: LeaseOptions,
  ) {}

  get name(): string {
    return this.options.name;
  }

  async acquire(): Promise<number | undefined> {
    const { name, holder, ttlMs } = this.options;
    const now = await this.databaseNow();
    const expiresAt = new Date(now + ttlMs);
    if (this.token !== undefined) {
      const renewed = await this.collection.update({ _id: name, holder, token: this.token }, { $set: { expiresAt } }, {});
      if (renewed.numberAffected === 1) return this.token;
      this.token = undefined;
    }
    const taken = await this.collection.update(
      { _id: name, expiresAt: { $lte: new Date(now) } },
      { $set: { holder, expiresAt }, $inc: { token: 1 } },
      {},
    );
    if (taken.numberAffected === 0) {
      try {
        await this.collection.insert({ _id: name, holder, token: 1, expiresAt });
      } catch (error) {
        if (isDuplicateKey(error)) return undefined;
        throw error;
      }
    }
    // Read back which token this holder got; another taker may have come between (then it is theirs).
    const { docs } = await this.collection.find({ collection: this.collection.name, selector: { _id: name } });
    const doc = docs[0];
    if (doc?.holder !== holder || typeof doc.token !== 'number') return undefined;
    this.token = doc.token;
    return this.token;
  }

  /** The database's time now, in ms since the epoch. */
  private async databaseNow(): Promise<number> {
    const stamp = () => this.collection.update({ _id: CLOCK_ID }, { $currentDate: { at: true } }, { upsert: true });
    // Two first stamps at once may both try to create the document (FerretDB says so): the loser's second one finds it.
    await stamp().catch((error: unknown) => {
      if (isDuplicateKey(error)) return stamp();
      throw error;
    });
    const { docs } = await this.collection.find({ collection: this.collection.name, selector: { _id: CLOCK_ID } });
    const at = docs[0]?.at;
    if (!(at instanceof Date)) throw new Error(`the lease clock in ${this.collection.name} holds ${String(at)}, not a date`);
    return at.getTime();
  }

  async release(): Promise<void> {
    if (this.token === undefined) return;
    const { name, holder } = this.options;
    // Expire it rather than delete it, so the token counter survives for the next holder.
    await this.collection.update({ _id: name, holder, token: this.token }, { $set: { expiresAt: new Date(0) } }, {});
    this.token = undefined;
  }
}
