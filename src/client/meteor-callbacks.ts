/**
 * Meteor's trailing callbacks, taken as Meteor's client takes them:
 * `call(name, ...params, callback)`, `apply(name, params, options, callback)`
 * and `subscribe(name, ...params, onReady | { onReady, onStop, onError })`.
 * Code ported from Meteor passes them; sent on as parameters instead, a
 * function reached the server as null, a callbacks object as {}, and neither
 * was ever called.
 */
import type { DDPError } from '../ddp/errors.js';
import { callSafely } from './emitter.js';
import type { Subscription } from './subscriptions.js';

export type MethodCallback = (error: DDPError | Error | undefined, result?: unknown) => void;

export interface SubscriptionCallbacks {
  onReady?: () => void;
  /** After stop(), without an error; when the server ends the subscription, with its error if any. */
  onStop?: (error?: DDPError) => void;
  /** Meteor 1.0's: the server's error only. */
  onError?: (error: DDPError) => void;
}

/** Removes a trailing function from `params` and returns it. */
export function takeMethodCallback(params: unknown[]): MethodCallback | undefined {
  return typeof params.at(-1) === 'function' ? (params.pop() as MethodCallback) : undefined;
}

/** Gives the call's outcome to `callback` too; the promise then counts as handled. */
export function reportTo<P extends Promise<unknown>>(promise: P, callback: MethodCallback | undefined): P {
  promise.then(
    (result) => callSafely(() => callback?.(undefined, result)),
    (error: Error) => callSafely(() => callback?.(error)),
  );
  return promise;
}

/** Removes trailing subscription callbacks (a function is onReady) from `params` and returns them. */
export function takeSubscriptionCallbacks(params: unknown[]): SubscriptionCallbacks {
  const last = params.at(-1) as SubscriptionCallbacks | undefined;
  if (typeof last === 'function') return { onReady: params.pop() as () => void };
  const given = last !== null && typeof last === 'object' && [last.onReady, last.onStop, last.onError].some((f) => typeof f === 'function');
  return given ? (params.pop() as SubscriptionCallbacks) : {};
}

export function listen(subscription: Subscription, { onReady, onStop, onError }: SubscriptionCallbacks): void {
  if (onReady) subscription.ready.then(() => callSafely(onReady), () => undefined);
  if (onStop || onError) {
    subscription.onStop((error) => {
      if (error) onError?.(error);
      onStop?.(error);
    });
  }
}
