/**
 * Where servers register (the discovery seam): each puts its entry with a time
 * to live; entries not renewed in time drop out of the list. Implementations:
 * `discovery-store-memory.ts` (one process, tests), `discovery-store-redis.ts`
 * (REDIS_URL) and `discovery-store-mongo.ts` (the app's MongoDB, nothing else to run).
 */
import type { LoadFigures } from './load-monitor.js';

export interface ServerEntry extends LoadFigures {
  id: string;
  /** Where clients reach it, e.g. https://eu1.example.com */
  url: string;
  /** Where other servers reach it to pass on raw WebSocket connections (http://host:port), if they may. */
  internalUrl?: string;
  /** Whether it sends new clients to the least loaded server. */
  balancer: boolean;
  /** The machine or container it runs on (in Kubernetes, the pod's name): how an autoscaler finds what to remove. */
  host?: string;
  /** `web`, `jobs` or `all`; a `jobs` server takes no clients, so no balancer sends it any. Absent from older servers: `all`. */
  role?: string;
  /** What a balancer sends with a connection it passes on to this server, so its X-Forwarded-For entry is trusted there. */
  passKey?: string;
  /** ms since the epoch, set when announced. */
  updatedAt: number;
}

/** What a server says about itself at each announcement. */
export type SelfDescription = Omit<ServerEntry, 'id' | 'updatedAt'>;

export interface DiscoveryStore {
  put(entry: ServerEntry, ttlMs: number): Promise<void>;
  remove(id: string): Promise<void>;
  /** Entries announced within their time to live. */
  list(ttlMs: number): Promise<ServerEntry[]>;
}
