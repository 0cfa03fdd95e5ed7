/**
 * What the code of a method or publication carries through its awaits: the
 * write scope (reactive/write-scope.ts) and the APM trace
 * (metrics/trace-scope.ts), in one AsyncLocalStorage. On Node 20 every
 * AsyncLocalStorage in use adds work to every promise the process makes (the
 * database driver makes dozens per command): two cost about twice one.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Trace } from './metrics/trace.js';
import type { WriteScope } from './reactive/write-scope.js';

export interface CallContext {
  readonly write?: WriteScope;
  readonly trace?: Trace;
}

const storage = new AsyncLocalStorage<CallContext>();

/** Runs `fn` with `change` over the current context (what it does not set is kept). */
export function runInContext<T>(change: CallContext, fn: () => T): T {
  return storage.run({ ...storage.getStore(), ...change }, fn);
}

export function currentContext(): CallContext | undefined {
  return storage.getStore();
}
