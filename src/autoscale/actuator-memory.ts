/**
 * An actuator that changes nothing but its own count: `perseid autoscale
 * --dry-run` (see what the policy would do against a live cluster) and tests.
 * It remembers each change and which servers it would have drained.
 */
import type { ServerEntry } from '../cluster/discovery-store.js';
import { leastLoaded, type Actuator } from './actuator.js';

export class MemoryActuator implements Actuator {
  readonly name = 'dry-run';
  /** Each count it was asked for, in order. */
  readonly changes: number[] = [];
  /** Ids of the servers it chose to drain, in order. */
  readonly drained: string[] = [];
  private count: number | undefined;

  constructor(initial?: number) {
    this.count = initial;
  }

  async current(servers: readonly ServerEntry[]): Promise<number> {
    return this.count ?? servers.length;
  }

  async settling(_servers: readonly ServerEntry[]): Promise<string | undefined> {
    return undefined;
  }

  async scaleTo(n: number, servers: readonly ServerEntry[]): Promise<void> {
    if (!Number.isInteger(n) || n < 0) throw new Error(`cannot scale to ${n}`);
    const from = await this.current(servers);
    if (n < from) this.drained.push(...leastLoaded(servers, from - n).map((s) => s.id));
    this.count = n;
    this.changes.push(n);
  }

  async close(): Promise<void> {}
}
