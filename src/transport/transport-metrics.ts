/** What the transport counts: messages and bytes out, slow clients dropped. */
import { metrics } from '../metrics/registry.js';

export const transportMetrics = {
  messagesSent: metrics.counter('perseid_messages_sent_total', 'DDP messages sent to clients'),
  bytesSent: metrics.counter('perseid_bytes_sent_total', 'Bytes written to WebSocket connections'),
  flushes: metrics.counter('perseid_flushes_total', 'Output flushes (at most one per event-loop turn)'),
  writes: metrics.counter('perseid_socket_writes_total', 'Socket writes (one per connection per event-loop turn with output)'),
  slowClientsDropped: metrics.counter('perseid_slow_clients_dropped_total', 'Connections closed because they did not read their messages'),
};
