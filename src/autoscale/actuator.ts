/**
 * The actuator seam: what changes the number of servers. The autoscaler
 * decides a count; an actuator makes it so on one platform. Implementations,
 * side by side, each saying when to choose it:
 * `actuator-dry-run.ts` (decide, print and export only: `--dry-run`, when KEDA
 * or the HPA acts on the exported count),
 * `actuator-memory.ts` (a platform in memory: tests),
 * `actuator-local.ts` (Perseid processes on this machine: `--local`),
 * `actuator-command.ts` (any platform with a CLI: `--scale-command "... {n}"`),
 * `actuator-kubernetes.ts` (a Deployment, through the official client).
 * One shared suite, test/suites/actuator.ts, runs against each.
 *
 * Scaling down never drops users: the servers that leave drain first (they
 * leave discovery, stop taking clients and close the open connections spread
 * over their drain window, so clients reconnect to the others). Where the
 * actuator picks them, it picks the least loaded.
 */
import type { ServerEntry } from '../cluster/discovery-store.js';

export interface Actuator {
  /** For logs: `local`, `command`, `kubernetes`, `dry-run`, `memory`. */
  readonly name: string;
  /**
   * False when scaleTo changes nothing (a dry run): the count is then what
   * discovery shows, and the autoscaler keeps deciding from it instead of
   * waiting for, or cooling down from, a change it never made.
   */
  readonly acts: boolean;
  /** How many servers the platform runs, or was last asked to; `servers` is what discovery sees now. */
  current(servers: readonly ServerEntry[]): Promise<number>;
  /** Why the last change is not done yet (servers starting, a rollout), or undefined when it is. */
  settling(servers: readonly ServerEntry[]): Promise<string | undefined>;
  /** Makes the count `n`; servers that leave drain first. Rejects with what went wrong. */
  scaleTo(n: number, servers: readonly ServerEntry[]): Promise<void>;
  /** Cuts short a change under way, when one can wait long (a command): the autoscaler is stopping. */
  abort?(): void;
  /** Lets go of what it holds (processes it started, clients). */
  close(): Promise<void>;
}

/** The `k` servers to remove: the least loaded first (fewest clients to move), among `eligible`. */
export function leastLoaded(servers: readonly ServerEntry[], k: number, eligible: (entry: ServerEntry) => boolean = () => true): ServerEntry[] {
  return servers
    .filter(eligible)
    .slice()
    .sort((a, b) => a.sessions - b.sessions || a.cpuPercent - b.cpuPercent)
    .slice(0, Math.max(0, k));
}

/** A count an actuator can be asked for: a whole number of servers, none at least. */
export function checkScaleTarget(n: number): void {
  if (!Number.isInteger(n) || n < 0) throw new Error(`cannot scale to ${n}`);
}
