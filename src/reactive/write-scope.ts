/**
 * The scope a method runs in, as seen by the collections it writes to: the fence
 * that holds back `updated`, and the seeded random stream that gives inserts the
 * same ids as the client's stub, and the call's APM trace (its database
 * operations are added to it). Carried through awaits in the call context
 * (call-context.ts), so application code does not pass it around (as in Meteor).
 */
import { currentContext, runInContext } from '../call-context.js';
import type { RandomStream } from '../ddp/random.js';
import type { Trace } from '../metrics/trace.js';
import type { WriteFence } from './write-fence.js';

export interface WriteScope {
  readonly fence?: WriteFence;
  readonly randomStream?: RandomStream;
  /** The method's or subscription's trace, when the APM is on. */
  readonly trace?: Trace;
}

export function runInWriteScope<T>(scope: WriteScope, fn: () => T): T {
  return runInContext({ write: scope }, fn);
}

export function currentWriteScope(): WriteScope | undefined {
  return currentContext()?.write;
}
