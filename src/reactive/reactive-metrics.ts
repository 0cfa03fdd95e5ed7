/** What the live-query layer counts: observer reuse, documents read, changes applied. */
import { metrics } from '../metrics/registry.js';

export const liveQueryMetrics = {
  created: metrics.counter('perseid_live_queries_created_total', 'Live queries started (one per distinct query)'),
  reused: metrics.counter('perseid_live_query_reuses_total', 'Observers attached to an already running live query'),
  stopped: metrics.counter('perseid_live_queries_stopped_total', 'Live queries stopped after their last observer left'),
  active: metrics.gauge('perseid_live_queries_active', 'Live queries running now'),
  observers: metrics.gauge('perseid_live_query_observers', 'Observers attached to live queries now'),
  docsRead: metrics.counter('perseid_live_query_documents_read_total', 'Documents read from the database by live queries'),
  fellBehind: metrics.counter('perseid_live_queries_fell_behind_total', 'Times a live query dropped its queued changes and re-read instead'),
  requeries: metrics.counter('perseid_live_query_requeries_total', 'Times a live query re-ran its query and diffed'),
  changesSeen: metrics.counter('perseid_live_query_changes_seen_total', 'Change events examined by live queries'),
  changesPublished: metrics.counter('perseid_live_query_changes_published_total', 'Document changes live queries passed to observers'),
};
