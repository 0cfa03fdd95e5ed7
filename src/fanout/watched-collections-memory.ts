/** The watched collections in one process's memory: for servers that share a process (tests, one process with an in-process bus). */
import type { WatchedCollections } from './watched-collections.js';

export class MemoryWatchedCollections implements WatchedCollections {
  /** Collection → when a server last said it watches it. */
  private readonly saidAt = new Map<string, number>();

  constructor(
    /** Announcements older than this no longer count. */
    private readonly ttlMs: number,
  ) {}

  async announce(collections: readonly string[]): Promise<void> {
    const now = Date.now();
    for (const collection of collections) this.saidAt.set(collection, now);
    for (const [collection, at] of this.saidAt) if (at < now - 4 * this.ttlMs) this.saidAt.delete(collection);
  }

  async list(): Promise<string[]> {
    const since = Date.now() - this.ttlMs;
    return [...this.saidAt].filter(([, at]) => at >= since).map(([collection]) => collection);
  }
}
