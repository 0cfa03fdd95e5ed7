/** What the server layer counts: sockets, sessions, messages, method calls and subscriptions, and the limits they met. */
import { RecentTimes } from '../metrics/recent-times.js';
import { metrics } from '../metrics/registry.js';

export const sessionMetrics = {
  sockets: metrics.gauge('perseid_sockets_open', 'Client connections open now (before and after the DDP handshake)'),
  sessions: metrics.gauge('perseid_sessions', 'DDP sessions open now'),
  sessionsOpened: metrics.counter('perseid_sessions_opened_total', 'DDP sessions opened'),
  messagesIn: metrics.counter('perseid_messages_received_total', 'DDP messages received'),
  bytesIn: metrics.counter('perseid_received_characters_total', 'Characters of DDP messages received (after decompression)'),
  methods: metrics.counter('perseid_method_calls_total', 'Method calls received'),
  subscriptions: metrics.counter('perseid_subscriptions_total', 'Subscriptions started'),
  outputWaits: metrics.counter('perseid_output_waits_total', 'Times a reply or initial data waited for its client to read earlier output'),
  connectionsRefused: metrics.counter('perseid_connections_refused_total', 'Connections refused for coming from an address that has too many'),
  parked: metrics.gauge('perseid_sessions_awaiting_resume', 'Sessions whose client went away, kept for the grace period in case it resumes them'),
  resumed: metrics.counter('perseid_sessions_resumed_total', 'Sessions a reconnecting client resumed (Meteor 3.5 session resumption)'),
  resumeOverflows: metrics.counter('perseid_sessions_resume_overflows_total', 'Sessions ended while their client was away because they held too much output for it'),
};

/** How long methods took (from the call to the result), for the p95 a server announces to discovery. */
export const methodTimes = new RecentTimes();
