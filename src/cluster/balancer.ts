/**
 * Where a new client should go: the least loaded live server. A client stays
 * here unless another server is clearly less loaded (by `margin`), so that
 * equals do not bounce clients between them. This server's own connections are
 * counted live; clients sent to another server since it last announced its load
 * count as its load, so a burst spreads instead of all landing on the server
 * that looked idlest.
 */
import type { Discovery } from './discovery.js';
import type { ServerEntry } from './discovery-store.js';
import { loadScore } from './load-monitor.js';

/** How much less loaded another server must be to get the client: its score × ratio + slack below ours. */
export interface Margin {
  ratio: number;
  slack: number;
}

/** Pinning a SockJS client costs nothing after `/sockjs/info`, so a small lead is enough. */
export const PIN_MARGIN: Margin = { ratio: 1.1, slack: 2 };
/**
 * A raw WebSocket passed on costs this server a relay for the connection's whole
 * life: only a clear imbalance is worth it (clients already spread stay put).
 */
export const PASS_ON_MARGIN: Margin = { ratio: 1.25, slack: 8 };

export class Balancer {
  /** Clients sent to each server since the announcement (updatedAt) they were counted against. */
  private readonly sent = new Map<string, { since: number; count: number }>();
  private readonly unreachableUntil = new Map<string, number>();

  constructor(
    private readonly discovery: Discovery,
    /** This server's open connections now: its own load needs no announcement, nor guesses about clients sent. */
    private readonly selfConnections: () => number,
  ) {}

  /** The server to send a new client to (among those `eligible` allows, this one always is), or undefined to keep it here. */
  pick(margin: Margin, eligible: (entry: ServerEntry) => boolean = () => true): ServerEntry | undefined {
    // A SockJS client sent to a server that died while the registry could not be read would fail, and come back here.
    if (this.discovery.stale()) return undefined;
    const now = Date.now();
    const sentTo = (entry: ServerEntry) => {
      const sent = this.sent.get(entry.id);
      return sent && sent.since === entry.updatedAt ? sent.count : 0;
    };
    const score = (entry: ServerEntry) => (entry.id === this.discovery.id ? loadScore({ ...entry, sessions: this.selfConnections() }) : loadScore(entry) + sentTo(entry));
    let self: ServerEntry | undefined;
    let best: ServerEntry | undefined;
    for (const entry of this.discovery.servers()) {
      if (entry.id === this.discovery.id) self = entry;
      // A jobs server serves no clients; an unreachable one gets none for a while.
      else if (entry.role === 'jobs' || !eligible(entry) || (this.unreachableUntil.get(entry.id) ?? 0) > now) continue;
      if (!best || score(entry) < score(best)) best = entry;
    }
    if (!best) return undefined;
    if (self && best !== self && score(self) <= score(best) * margin.ratio + margin.slack) best = self;
    if (best === self) return undefined;
    this.sent.set(best.id, { since: best.updatedAt, count: sentTo(best) + 1 });
    return best;
  }

  /** `id` did not answer: send nobody there until its registry entry would have expired. */
  unreachable(id: string): void {
    this.unreachableUntil.set(id, Date.now() + this.discovery.ttlMs);
  }
}
