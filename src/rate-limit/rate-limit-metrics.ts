/** What rate limiting counts: refused calls, and store failures (which let calls through). */
import { metrics } from '../metrics/registry.js';

export const rateLimitMetrics = {
  refused: metrics.counter('perseid_rate_limit_refused_total', 'Method calls and subscriptions refused by a rate limit rule'),
  storeErrors: metrics.counter('perseid_rate_limit_store_errors_total', 'Rate limit checks that could not reach their store (the call was allowed)'),
};
