/**
 * Connections per client address: one machine (or one script) cannot take
 * every connection the server can hold. Behind proxies the address is the
 * forwarded one (HTTP_FORWARDED_COUNT); without that setting every client
 * behind a proxy shares the proxy's address, and so this limit.
 */
export class AddressLimit {
  private readonly counts = new Map<string, number>();

  /** @param limit connections per address; 0 for no limit */
  constructor(readonly limit: number) {}

  /** Takes a place for `address`; false when it already has `limit` connections. */
  take(address: string | undefined): boolean {
    if (this.limit === 0 || address === undefined) return true;
    const count = this.counts.get(address) ?? 0;
    if (count >= this.limit) return false;
    this.counts.set(address, count + 1);
    return true;
  }

  release(address: string | undefined): void {
    if (this.limit === 0 || address === undefined) return;
    const count = (this.counts.get(address) ?? 0) - 1;
    if (count > 0) this.counts.set(address, count);
    else this.counts.delete(address);
  }
}
