/**
 * Reconnect delays, as Meteor's `retry` package computes them: the first
 * `minCount` retries wait `minTimeout`, then `baseTimeout × exponent^count`
 * capped at `maxTimeout`, times a random factor in [1 − fuzz/2, 1 + fuzz/2)
 * so that clients of a restarted server do not all come back at once.
 */
export interface BackoffOptions {
  minCount: number;
  minTimeout: number;
  baseTimeout: number;
  exponent: number;
  maxTimeout: number;
  fuzz: number;
}

export const METEOR_BACKOFF: Readonly<BackoffOptions> = {
  minCount: 2,
  minTimeout: 10,
  baseTimeout: 1000,
  exponent: 2.2,
  maxTimeout: 5 * 60 * 1000,
  fuzz: 0.5,
};

/** Delay before retry number `count` (0-based). Like Meteor, the fuzz applies after the cap. */
export function retryDelay(count: number, options: BackoffOptions, random: () => number = Math.random): number {
  if (count < options.minCount) return options.minTimeout;
  const capped = Math.min(options.maxTimeout, options.baseTimeout * options.exponent ** count);
  return capped * (random() * options.fuzz + (1 - options.fuzz / 2));
}

/**
 * WebSocket's "service restart" close code: the server (`perseid dev`, on a
 * save) says it is back in a moment, so the client tries every
 * RESTART_RETRY_MS for RESTART_WINDOW_MS instead of backing off (Meteor's
 * third try comes ~5 s later, which a page reload after each save would wait).
 */
export const SERVER_RESTART_CODE = 1012;
export const RESTART_RETRY_MS = 200;
export const RESTART_WINDOW_MS = 15_000;
