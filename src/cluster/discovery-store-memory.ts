/** Discovery in one process's memory: for tests and a single server. Siblings: `discovery-store-redis.ts`, `discovery-store-mongo.ts`. */
import type { DiscoveryStore, ServerEntry } from './discovery-store.js';

export class MemoryDiscoveryStore implements DiscoveryStore {
  private readonly entries = new Map<string, ServerEntry>();

  async put(entry: ServerEntry): Promise<void> {
    this.entries.set(entry.id, entry);
  }

  async remove(id: string): Promise<void> {
    this.entries.delete(id);
  }

  async list(ttlMs: number): Promise<ServerEntry[]> {
    const cutoff = Date.now() - ttlMs;
    return [...this.entries.values()].filter((e) => e.updatedAt > cutoff);
  }
}
