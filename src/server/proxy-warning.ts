/**
 * The warning that connections come through a proxy while HTTP_FORWARDED_COUNT
 * is unset, said before the per-address limits refuse a whole site's clients
 * as one address, not after. Once per machine: with workers their primary,
 * which sees every connection first, says it (each worker saying it repeated
 * it once per worker).
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Logger } from '../log.js';
import { forwardedHops } from './connection-handle.js';

export class UntrustedProxyWarning {
  private said = false;

  constructor(
    private readonly log: Logger,
    private readonly forwardedCount: number,
  ) {}

  /** `ownProxies`: Perseid's own proxies the connection came through, each listed in X-Forwarded-For. */
  check(remoteAddress: string | undefined, headers: IncomingHttpHeaders, ownProxies: number): void {
    if (this.said || this.forwardedCount > 0 || forwardedHops(headers) <= ownProxies) return;
    this.said = true;
    this.log.warn(
      'a connection came through a proxy (X-Forwarded-For) but HTTP_FORWARDED_COUNT is not set: every client behind that proxy counts as its address for the per-address limits (connections, subscriptions, logins); if a proxy stands in front of this server, set HTTP_FORWARDED_COUNT to the number of proxies (said once)',
      { proxy: remoteAddress },
    );
  }

  /** Leaves it to another process (a worker's primary). */
  leaveToOther(): void {
    this.said = true;
  }
}
