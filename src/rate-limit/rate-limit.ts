/**
 * The rate-limit store seam: where a rule's counters live. A rule counts in a
 * fixed window that starts when the rule is added and, once it has ended,
 * again at the rule's next event (Meteor's `rate-limit` package: one reset
 * time per rule, shared by all its buckets). `rate-limit-memory.ts` keeps the
 * counts in this process; `rate-limit-redis.ts` in Redis, so every server of
 * a cluster shares them.
 */

/** A rule as the store sees it: an id that is the same on every server running the same app, and its window. */
export interface RuleWindow {
  readonly id: string;
  readonly intervalMs: number;
  /** When the rule was added (ms since the epoch): its first window starts then. */
  readonly createdAt: number;
}

/**
 * The most buckets a store keeps for one rule: the most recent keys, in two
 * generations of half as many each, the older dropped whole when the newer
 * fills. A window can be long (forgotPassword's is an hour), and a flood of
 * distinct keys (an e-mail address per call, from many client addresses) grew
 * the store by a bucket a key until the window ended. A bucket is dropped only
 * after this many / 2 newer ones, and then starts again from 0.
 */
export const MAX_BUCKETS_PER_RULE = 100_000;

export interface Hit {
  /** Events counted in the bucket in the current window, this one included. */
  count: number;
  /** Milliseconds until the rule's window ends. */
  timeToReset: number;
}

export interface RateLimitStore {
  /**
   * Counts one event in `bucket` of `rule` at `now`: first, if more than the
   * rule's interval has passed since its window started, the window restarts
   * at `now` with every bucket at zero. One atomic step. Keeps at most
   * MAX_BUCKETS_PER_RULE buckets per rule.
   */
  hit(rule: RuleWindow, bucket: string, now: number): Promise<Hit>;
  /** Forgets a removed rule's counters. */
  forget(rule: RuleWindow): Promise<void>;
  close(): Promise<void>;
}
