/**
 * Hooks the server runs before it dispatches a method call or a subscription
 * (after the method or publication is found, before its handler runs). A hook
 * that throws refuses the call: the client gets the error in the method's
 * `result` or the subscription's `nosub`, as Meteor's DDPRateLimiter answers.
 * Rate limits use this; so can anything else that must see every call first.
 */
import type { ConnectionHandle } from './connection-handle.js';

/** A method call or subscription about to run; the rate limiter's fields are Meteor's. */
export interface DispatchEvent {
  type: 'method' | 'subscription';
  name: string;
  userId: string | null;
  connectionId: string;
  clientAddress: string | undefined;
  /** The parameters as the client sent them (do not mutate). */
  params: readonly unknown[];
  connection: ConnectionHandle;
}

export type DispatchHook = (event: DispatchEvent) => void | Promise<void>;

/** Runs `hooks` in order; returns undefined (no promise, no extra turn) when none is async. */
export function runDispatchHooks(hooks: readonly DispatchHook[], event: DispatchEvent): Promise<void> | undefined {
  for (let i = 0; i < hooks.length; i++) {
    const outcome = hooks[i]!(event);
    if (outcome instanceof Promise) return outcome.then(() => runDispatchHooks(hooks.slice(i + 1), event));
  }
  return undefined;
}
