/**
 * A limit on accounts calls per key that no rate limit rule can name: a
 * client address over all its connections, counting only the calls that
 * cost (a resume login does not), or the e-mail address forgotPassword
 * mails. Counted by the server's rate limiter, in its store (Redis when the
 * cluster shares one), and refused as its rules refuse.
 */
import { checkRule, rateLimiter, TOO_MANY_REQUESTS, type RateLimitReply } from '../rate-limit/index.js';
import type { PerseidServer } from '../server/app.js';

/** A rate limit's count and window: `numRequests` calls per `intervalMs`. */
export interface RateLimitWindow {
  numRequests: number;
  intervalMs: number;
}

export class KeyLimit {
  /** Made at the first call: it makes the server's rate limiter, whose store an app may still choose until then. */
  private count: ((key: string) => Promise<RateLimitReply>) | undefined;

  constructor(
    private readonly server: PerseidServer,
    private readonly name: string,
    private readonly window: RateLimitWindow,
  ) {
    checkRule({}, window.numRequests, window.intervalMs, undefined);
  }

  /** Counts one call for `key`; past the limit, throws Meteor's too-many-requests with `details.timeToReset`. */
  async hit(key: string): Promise<void> {
    this.count ??= rateLimiter(this.server).keyLimit(this.name, this.window.numRequests, this.window.intervalMs);
    const { allowed, timeToReset } = await this.count(key);
    if (!allowed) throw TOO_MANY_REQUESTS({ seconds: Math.ceil(timeToReset / 1000) }, { timeToReset });
  }
}
