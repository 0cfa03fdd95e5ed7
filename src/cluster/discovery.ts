/**
 * How servers find each other: each announces its public URL and its load
 * every `intervalMs`, with a time to live, in a DiscoveryStore; an entry not
 * renewed within it (a dead server) drops out.
 */
import { FailureLog } from '../failure-log.js';
import type { Logger } from '../log.js';
import type { DiscoveryStore, SelfDescription, ServerEntry } from './discovery-store.js';

export interface DiscoveryOptions {
  intervalMs?: number;
  ttlMs?: number;
  log: Logger;
}

/** Announces this server and keeps the list of live ones, both on a timer. */
export class Discovery {
  private known: ServerEntry[] = [];
  /** When the list was last read from the store (performance.now()). */
  private listedAt = -Infinity;
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> = Promise.resolve();
  private left = false;
  readonly intervalMs: number;
  readonly ttlMs: number;
  private readonly failures: FailureLog;

  constructor(
    private readonly store: DiscoveryStore,
    readonly id: string,
    private readonly describe: () => SelfDescription,
    private readonly options: DiscoveryOptions,
  ) {
    this.intervalMs = options.intervalMs ?? 2000;
    this.ttlMs = options.ttlMs ?? 3 * this.intervalMs;
    this.failures = new FailureLog(options.log, 'discovery update');
  }

  async start(): Promise<void> {
    await (this.ticking = this.tick());
    this.timer = setInterval(() => {
      this.ticking = this.tick();
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Live servers, as of the last refresh (this one included until it leaves). */
  servers(): readonly ServerEntry[] {
    return this.known;
  }

  /** Whether the list is older than the time to live (the registry unreachable): it may name servers that died since. */
  stale(): boolean {
    return performance.now() - this.listedAt > this.ttlMs;
  }

  /**
   * Stops announcing and removes this server's entry (drain: no new clients are sent here). Waits for the registry an
   * interval at most: when it does not answer (Redis down), the entry expires within its time to live anyway, and the
   * drain that follows must not wait for the registry to come back.
   */
  async leave(): Promise<void> {
    this.left = true;
    clearInterval(this.timer);
    const removed = this.ticking.then(() => this.store.remove(this.id));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), this.intervalMs)));
    const outcome = await Promise.race([removed, late]).catch((error: Error) => error);
    clearTimeout(timer);
    this.known = this.known.filter((entry) => entry.id !== this.id);
    if (outcome === 'late') this.options.log.warn('could not leave the registry in time; this server\'s entry expires by itself', { withinMs: this.ttlMs });
    else if (outcome instanceof Error) this.options.log.warn('could not leave the registry', { error: outcome.message });
  }

  private async tick(): Promise<void> {
    try {
      await this.store.put({ ...this.describe(), id: this.id, updatedAt: Date.now() }, this.ttlMs);
      const servers = await this.store.list(this.ttlMs);
      this.failures.succeeded();
      if (this.left) return;
      this.known = servers;
      this.listedAt = performance.now();
    } catch (error) {
      this.failures.failed(error);
    }
  }
}
