/**
 * `perseid autoscale --dry-run`: decides, prints and exports, and changes
 * nothing itself. Choose it to see what the policy would do against a live
 * cluster, or to let KEDA or the HPA act on the exported desired count. The
 * count is what discovery shows, so whoever acts on a decision, the next
 * round sees the result, and until then the decision stands.
 */
import type { ServerEntry } from '../cluster/discovery-store.js';
import { checkScaleTarget, type Actuator } from './actuator.js';

export class DryRunActuator implements Actuator {
  readonly name = 'dry-run';
  readonly acts = false;

  async current(servers: readonly ServerEntry[]): Promise<number> {
    return servers.length;
  }

  async settling(_servers: readonly ServerEntry[]): Promise<string | undefined> {
    return undefined;
  }

  async scaleTo(n: number, _servers: readonly ServerEntry[]): Promise<void> {
    checkScaleTarget(n);
  }

  async close(): Promise<void> {}
}
