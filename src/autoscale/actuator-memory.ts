/**
 * A platform in memory: the count it was last asked for, the servers it would
 * have drained. The in-process actuator the shared suite and the autoscaler's
 * tests run against.
 */
import type { ServerEntry } from '../cluster/discovery-store.js';
import { checkScaleTarget, leastLoaded, type Actuator } from './actuator.js';

export class MemoryActuator implements Actuator {
  readonly name = 'memory';
  readonly acts = true;
  /** Each count it was asked for, in order. */
  readonly changes: number[] = [];
  /** Ids of the servers it chose to drain, in order. */
  readonly drained: string[] = [];

  constructor(private count: number) {}

  async current(_servers: readonly ServerEntry[]): Promise<number> {
    return this.count;
  }

  async settling(_servers: readonly ServerEntry[]): Promise<string | undefined> {
    return undefined;
  }

  async scaleTo(n: number, servers: readonly ServerEntry[]): Promise<void> {
    checkScaleTarget(n);
    if (n < this.count) this.drained.push(...leastLoaded(servers, this.count - n).map((s) => s.id));
    this.count = n;
    this.changes.push(n);
  }

  async close(): Promise<void> {}
}
