/** The seam between a server's front door and whatever decides where new clients go (a cluster's balancer). */
import type { IncomingMessage } from 'node:http';
import type { ServerSummary } from '../metrics/apm.js';
import type { Target } from '../transport/proxy.js';

/**
 * Marks a connection a balancer passed on, so the server receiving it serves it rather than balancing again. Its value
 * is the receiving server's pass key, which tells it the X-Forwarded-For entry the balancer added can be trusted.
 */
export const BALANCED_HEADER = 'x-perseid-balanced';

/** Names a cluster's member in its operational answers: its advice and capacity are its own, not the cluster's. */
export const SERVER_HEADER = 'x-perseid-server';

export interface RoutedTarget extends Target {
  /** The key the target announced for connections passed on to it (absent from older servers). */
  passKey?: string;
  /** The target refused the connection: stop choosing it for a while. */
  unreachable(): void;
}

export interface ConnectionRouter {
  /** This server's id in the cluster's registry (the `server` its summary is listed under). */
  readonly id: string;
  /** The SockJS base URL to pin a new SockJS client to, or undefined to keep it here. */
  sockjsBaseUrl(): string | undefined;
  /** Where to pass a WebSocket upgrade on to, or undefined to serve it here. */
  upgradeTarget(req: IncomingMessage): RoutedTarget | undefined;
  /** Whether a server of the cluster passed this upgrade on to this one (its BALANCED_HEADER carries this server's pass key). */
  passedOnByPeer(req: IncomingMessage): boolean;
  /**
   * The origins of the other servers the router sends clients between: a page
   * one of them served may connect here (its SockJS client pinned here by
   * `base_url`), so origin checks and the pages' Content-Security-Policy allow them.
   */
  peerOrigins(): readonly string[];
  /** Every server's load as the router last heard it, for `/metrics` and the dashboard. */
  serverSummaries(): ServerSummary[];
}
