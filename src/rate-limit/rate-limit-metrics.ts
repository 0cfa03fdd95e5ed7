/** What rate limiting counts: refused calls, and store failures (the process then counts alone). */
import { metrics } from '../metrics/registry.js';

export const rateLimitMetrics = {
  refused: metrics.counter('perseid_rate_limit_refused_total', 'Method calls and subscriptions refused by a rate limit rule'),
  storeErrors: metrics.counter('perseid_rate_limit_store_errors_total', 'Rate limit checks that could not reach their store (counted in this process instead)'),
};
