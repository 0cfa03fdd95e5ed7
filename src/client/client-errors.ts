/**
 * The errors the client itself raises to the application (rejected calls and
 * subscriptions, refused writes), catalogued like the server's so that
 * docs/reference/errors.md lists them.
 */
import { defineError } from '../ddp/errors.js';

const thrown = ['thrown'] as const;

export const ClientErrors = {
  disconnected: defineError('CLIENT_DISCONNECTED', 'disconnected', 'The client disconnected', thrown),
  notConnected: defineError('CLIENT_CLOSED', 'disconnected', 'The client is disconnected; call connect() first', thrown),
  connectionLost: defineError('CLIENT_CONNECTION_LOST', 'connection-lost', 'The connection was lost: {reason}', thrown),
  versionMismatch: defineError(
    'CLIENT_VERSION_MISMATCH',
    'version-mismatch',
    'The server requires DDP version {version}, which this client does not offer',
    thrown,
  ),
  serverError: defineError('CLIENT_SERVER_ERROR', 'server-error', '{reason}', thrown),
  invocationFailed: defineError(
    'CLIENT_INVOCATION_FAILED',
    'invocation-failed',
    "Method '{name}' might not have run: the connection dropped and noRetry is set",
    thrown,
  ),
  subscriptionStopped: defineError(
    'CLIENT_SUBSCRIPTION_STOPPED',
    'subscription-stopped',
    "Subscription '{name}' ended before it was ready",
    thrown,
  ),
  writeOutsideStub: defineError(
    'CLIENT_WRITE_OUTSIDE_STUB',
    'write-outside-stub',
    "Client collections are written only by method stubs: call a method instead of {operation} on '{collection}'",
    thrown,
  ),
  duplicateId: defineError('CLIENT_DUPLICATE_ID', 'duplicate-id', "Duplicate _id {id} in '{collection}'", thrown),
};
