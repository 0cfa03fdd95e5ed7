/**
 * Leases in one process's memory. For a single process (the embedded store's
 * jobs) and tests; across processes use `lease-redis.ts` or `lease-database.ts`.
 */
import type { Lease, LeaseOptions } from './lease.js';

interface Held {
  holder: string;
  token: number;
  expiresAt: number;
}

/** A table of leases; every lease made from one table competes with the others of that table. */
export class MemoryLeases {
  private readonly held = new Map<string, Held>();
  private readonly tokens = new Map<string, number>();

  lease(options: LeaseOptions): Lease {
    return new MemoryLease(this, options);
  }

  /** @internal */
  acquire({ name, holder, ttlMs }: LeaseOptions): number | undefined {
    const now = Date.now();
    const current = this.held.get(name);
    if (current && current.expiresAt > now && current.holder !== holder) return undefined;
    let token = current?.holder === holder && current.expiresAt > now ? current.token : undefined;
    if (token === undefined) {
      token = (this.tokens.get(name) ?? 0) + 1;
      this.tokens.set(name, token);
    }
    this.held.set(name, { holder, token, expiresAt: now + ttlMs });
    return token;
  }

  /** @internal */
  release({ name, holder }: LeaseOptions): void {
    if (this.held.get(name)?.holder === holder) this.held.delete(name);
  }
}

class MemoryLease implements Lease {
  constructor(
    private readonly table: MemoryLeases,
    private readonly options: LeaseOptions,
  ) {}

  get name(): string {
    return this.options.name;
  }

  async acquire(): Promise<number | undefined> {
    return this.table.acquire(this.options);
  }

  async release(): Promise<void> {
    this.table.release(this.options);
  }
}
