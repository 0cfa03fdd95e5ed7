/** What the fan-out counts: messages published and received (a server receives only what its live queries need). */
import { metrics } from '../metrics/registry.js';

export const fanoutMetrics = {
  published: metrics.counter('perseid_fanout_published_total', 'Change messages published on the fan-out bus'),
  received: metrics.counter('perseid_fanout_received_total', 'Change messages received from the fan-out bus'),
  applied: metrics.counter('perseid_fanout_applied_total', 'Changes from other servers applied to live queries here'),
  resyncs: metrics.counter('perseid_fanout_resyncs_received_total', 'Re-read orders received from the fan-out bus (a collection dropped elsewhere; changes another server could not send; the relay starting to follow a collection, or losing track)'),
};
