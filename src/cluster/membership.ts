/**
 * A server's place in a cluster of servers: it announces its URL and load in
 * the registry and, when it balances, sends each new client to the least loaded
 * server. SockJS clients are pinned by answering `/sockjs/info` with that
 * server's base URL (their traffic then goes straight there); raw WebSocket
 * connections are passed on through this server, or served here when the
 * chosen server takes no passed-on connections.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { hostname } from 'node:os';
import type { Logger } from '../log.js';
import { metrics } from '../metrics/registry.js';
import { isRawWebSocketPath, pathOf } from '../transport/paths.js';
import { Balancer, PASS_ON_MARGIN, PIN_MARGIN } from './balancer.js';
import { BALANCED_HEADER, type ConnectionRouter, type RoutedTarget } from '../server/connection-router.js';
import { Discovery } from './discovery.js';
import type { DiscoveryStore, ServerEntry } from './discovery-store.js';
import { serverSummary, type LoadFigures } from './load-monitor.js';
import type { ServerSummary } from '../metrics/apm.js';

export interface MembershipOptions {
  /** Where clients reach this server (http://host:port or https://name). */
  url: string;
  /** Where other servers pass raw WebSocket connections to (plain http://host:port); by default `url` when it is http. */
  internalUrl?: string;
  /** Whether this server sends new clients to the least loaded server. */
  balancer: boolean;
  /** This server's role (`web`, `jobs`, `all`), announced so balancers send no clients to a jobs server. */
  role?: string;
  store: DiscoveryStore;
  id?: string;
  /** How often the server announces itself and refreshes the list (default 2000 ms). */
  intervalMs?: number;
  /** How long an entry lives without being renewed (default 3 intervals). */
  ttlMs?: number;
  log: Logger;
}

/** A name for this process in the registry and on the bus: readable, and unique even for two processes of one host. */
export function processId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
}

function withoutTrailingSlash(url: string): string {
  return url.endsWith('/') ? url.slice(0, -1) : url;
}

export class ClusterMembership implements ConnectionRouter {
  readonly discovery: Discovery;
  private readonly balancer: Balancer;
  /** Announced in the registry for balancers to send with the connections they pass on here (passedOnByPeer). */
  private readonly passKey = randomBytes(18).toString('base64url');
  private leaving: Promise<void> | undefined;

  constructor(
    private readonly options: MembershipOptions,
    load: () => LoadFigures,
    connections: () => number,
  ) {
    const url = withoutTrailingSlash(new URL(options.url).href);
    const internal = options.internalUrl ?? (url.startsWith('http:') ? url : undefined);
    const id = options.id ?? processId();
    this.discovery = new Discovery(
      options.store,
      id,
      () => ({ url, internalUrl: internal && withoutTrailingSlash(internal), balancer: options.balancer, role: options.role ?? 'all', host: hostname(), passKey: this.passKey, ...load() }),
      { intervalMs: options.intervalMs, ttlMs: options.ttlMs, log: options.log },
    );
    this.balancer = new Balancer(this.discovery, connections);
  }

  get id(): string {
    return this.discovery.id;
  }

  /** Announces this server; resolves once it is registered and knows the others. */
  async start(): Promise<void> {
    await this.discovery.start();
    // Without the pass keys: whoever reads the stats could otherwise have their own addresses taken on trust.
    metrics.section('cluster', () => ({ id: this.id, balancer: this.options.balancer, servers: this.discovery.servers().map(({ passKey: _, ...entry }) => entry) }));
    this.options.log.info('joined the cluster', { id: this.id, url: this.options.url, balancer: this.options.balancer, servers: this.discovery.servers().length });
  }

  servers(): readonly ServerEntry[] {
    return this.discovery.servers();
  }

  serverSummaries(): ServerSummary[] {
    return this.discovery.servers().map((s) => serverSummary(s.id, s));
  }

  peerOrigins(): readonly string[] {
    return this.discovery.servers().map((server) => new URL(server.url).origin);
  }

  sockjsBaseUrl(): string | undefined {
    if (!this.options.balancer) return undefined;
    const to = this.balancer.pick(PIN_MARGIN);
    return to && `${to.url}/sockjs`;
  }

  upgradeTarget(req: IncomingMessage): RoutedTarget | undefined {
    if (!this.options.balancer || req.headers[BALANCED_HEADER] !== undefined) return undefined;
    if (!isRawWebSocketPath(pathOf(req.url))) return undefined;
    const to = this.balancer.pick(PASS_ON_MARGIN, (entry) => entry.internalUrl !== undefined);
    if (!to?.internalUrl) return undefined;
    const target = new URL(to.internalUrl);
    return { host: target.hostname.replace(/^\[|\]$/g, ''), port: Number(target.port || 80), passKey: to.passKey, unreachable: () => this.balancer.unreachable(to.id) };
  }

  passedOnByPeer(req: IncomingMessage): boolean {
    const key = req.headers[BALANCED_HEADER];
    if (typeof key !== 'string') return false;
    // Compared as bytes: a header's characters past ASCII take more bytes than they count as, and unequal lengths throw.
    const given = Buffer.from(key);
    return given.length === this.passKey.length && timingSafeEqual(given, Buffer.from(this.passKey));
  }

  /** Leaves the registry: no balancer sends new clients here any more. */
  leave(): Promise<void> {
    return (this.leaving ??= this.discovery.leave().then(() => {
      metrics.removeSection('cluster');
      this.options.log.info('left the cluster', { id: this.id });
    }));
  }
}
