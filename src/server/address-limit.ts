/**
 * Connections per client address: one machine (or one script) cannot take
 * every connection the server can hold. Behind proxies the address is the
 * forwarded one (HTTP_FORWARDED_COUNT); without that setting every client
 * behind a proxy shares the proxy's address, and so this limit. An IPv6
 * client is its /64 (see address-group.ts), here and below.
 */
import { addressGroup } from './address-group.js';

/** --max-connections-per-address's default. */
export const DEFAULT_CONNECTIONS_PER_ADDRESS = 1000;

export class AddressLimit {
  private readonly counts = new Map<string, number>();

  /** @param limit connections per address; 0 for no limit */
  constructor(readonly limit: number) {}

  /** Takes a place for `address`; false when it already has `limit` connections. */
  take(address: string | undefined): boolean {
    if (this.limit === 0 || address === undefined) return true;
    const client = addressGroup(address);
    const count = this.counts.get(client) ?? 0;
    if (count >= this.limit) return false;
    this.counts.set(client, count + 1);
    return true;
  }

  /** Whether `address` has `limit` places taken. */
  full(address: string | undefined): boolean {
    return this.limit !== 0 && address !== undefined && (this.counts.get(addressGroup(address)) ?? 0) >= this.limit;
  }

  release(address: string | undefined): void {
    if (this.limit === 0 || address === undefined) return;
    const client = addressGroup(address);
    const count = (this.counts.get(client) ?? 0) - 1;
    if (count > 0) this.counts.set(client, count);
    else this.counts.delete(client);
  }
}

/**
 * Sessions waiting for their client to come back, per client address. A
 * waiting session has given its connection's place back (its client needs one
 * to come back with), so these are bounded apart: at most as many per address
 * as it may have connections, the oldest ending first. Else one address could
 * connect, subscribe and vanish over and over, leaving thousands waiting.
 */
export class WaitingPerAddress<T> {
  private readonly waiting = new Map<string, Set<T>>();

  /** @param limit waiting sessions per address; 0 for no limit */
  constructor(readonly limit: number) {}

  /** Adds `item`; returns the oldest waiting from `address` when that passes the limit (for the caller to end). */
  add(address: string | undefined, item: T): T | undefined {
    if (this.limit === 0 || address === undefined) return undefined;
    const client = addressGroup(address);
    let items = this.waiting.get(client);
    if (!items) this.waiting.set(client, (items = new Set()));
    items.add(item);
    if (items.size <= this.limit) return undefined;
    const [oldest] = items;
    return oldest;
  }

  delete(address: string | undefined, item: T): void {
    if (address === undefined) return;
    const client = addressGroup(address);
    const items = this.waiting.get(client);
    if (!items?.delete(item)) return;
    if (items.size === 0) this.waiting.delete(client);
  }
}
