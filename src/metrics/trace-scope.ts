/**
 * The call a piece of code runs for, as the APM sees it, carried through
 * awaits in the call context (call-context.ts). Methods carry their trace
 * in their write scope (reactive/write-scope.ts); a publish function runs in
 * none (a write scope there made the FerretDB oplog write-fence test fail),
 * so its own reads find their subscription's trace here instead. A trace is
 * answered only until it finishes: anything long-lived the handler started
 * (a connection, a feed) keeps this context, and must not add to it later.
 */
import { currentContext, runInContext } from '../call-context.js';
import type { Trace } from './trace.js';

export function runInTrace<T>(trace: Trace, fn: () => T): T {
  return runInContext({ trace }, fn);
}

/** The unfinished trace of the code running now, if any. */
export function currentTrace(): Trace | undefined {
  const trace = currentContext()?.trace;
  return trace && !trace.finished ? trace : undefined;
}
