/**
 * What the transport counts: messages and bytes out, compression (bytes
 * before and after, on connections that negotiated permessage-deflate),
 * unsent output, clients held back or dropped, refused requests.
 */
import { metrics } from '../metrics/registry.js';

export const transportMetrics = {
  messagesSent: metrics.counter('perseid_messages_sent_total', 'DDP messages sent to clients'),
  bytesSent: metrics.counter('perseid_bytes_sent_total', 'Bytes sent to clients: WebSocket frames as written, SockJS polling message payloads'),
  compressionInput: metrics.counter('perseid_compression_input_bytes_total', 'Bytes of the messages sent on connections that negotiated permessage-deflate, before compression'),
  compressionOutput: metrics.counter('perseid_compression_output_bytes_total', 'Bytes written for those messages (frames, compressed when over the threshold); output / input is the compression ratio'),
  flushes: metrics.counter('perseid_flushes_total', 'Output flushes (at most one per event-loop turn)'),
  writes: metrics.counter('perseid_socket_writes_total', 'Socket writes (one per connection per event-loop turn with output)'),
  slowClientsDropped: metrics.counter('perseid_slow_clients_dropped_total', 'Connections closed because they did not read their messages'),
  bufferedBytes: metrics.gauge('perseid_unsent_bytes', 'Output queued for clients and not yet handed to the kernel, over every connection (as last checked)'),
  budgetHolds: metrics.counter('perseid_output_budget_holds_total', 'Connections held back because the server held more unsent output than its budget'),
  budgetDrops: metrics.counter('perseid_output_budget_drops_total', 'Connections closed because the server held more unsent output than its budget'),
  inputBudgetDrops: metrics.counter('perseid_input_budget_drops_total', 'Connections closed because the server held more bytes of incoming messages not yet complete than its budget'),
  refusedRequests: metrics.counter('perseid_refused_requests_total', 'HTTP requests and upgrades refused (origin not allowed, body too large)'),
  connectionErrors: metrics.counter('perseid_connection_errors_total', 'Connections closed after an unexpected exception in handling them'),
};
