/**
 * The options of `perseid start` that bound what one client may cost and say
 * which pages may connect; a server, its workers and their primary read the
 * same ones. (The admin token is read from PERSEID_ADMIN_TOKEN only: a flag
 * would show in the process list.)
 */
import { adminToken } from '../server/admin-access.js';
import type { ServerOptions } from '../server/app.js';
import { checkContentSecurityPolicy } from '../server/http.js';
import { parseAllowedOrigins } from '../transport/origins.js';
import { integerOption, optionName, UsageError, type OptionSpec, type Parsed } from './args.js';

export const protectionOptions: Record<string, OptionSpec> = {
  'max-buffered': {
    type: 'string',
    env: 'PERSEID_MAX_BUFFERED',
    value: '<bytes>',
    help: 'Output one client may leave unread before it is dropped as too slow, e.g. 64MiB (default 64MiB)',
  },
  'max-total-buffered': {
    type: 'string',
    env: 'PERSEID_MAX_TOTAL_BUFFERED',
    value: '<bytes>',
    help: 'Unsent output over all clients past which those holding the most are held back, then dropped (default 256MiB, or a quarter of the heap limit when less)',
  },
  'max-subscriptions': { type: 'string', env: 'PERSEID_MAX_SUBSCRIPTIONS', value: '<n>', help: 'Subscriptions one connection may hold (default 1000)' },
  'max-total-subscriptions': {
    type: 'string',
    env: 'PERSEID_MAX_TOTAL_SUBSCRIPTIONS',
    value: '<n>',
    help: 'Subscriptions over all connections of a process, half of them at most from one client address (default one per 8 KiB of the heap limit: 262144 for 2 GiB)',
  },
  'max-queued-messages': {
    type: 'string',
    env: 'PERSEID_MAX_QUEUED_MESSAGES',
    value: '<n>',
    help: 'Messages one connection may have waiting to run before it is dropped (default 10000)',
  },
  'max-connections-per-address': {
    type: 'string',
    env: 'PERSEID_MAX_CONNECTIONS_PER_ADDRESS',
    value: '<n>',
    help: 'Connections from one client address (an IPv6 /64), 0 for no limit (default 1000; behind proxies set HTTP_FORWARDED_COUNT)',
  },
  'resume-grace-ms': {
    type: 'string',
    env: 'PERSEID_RESUME_GRACE_MS',
    value: '<ms>',
    help: 'How long a session whose client lost its connection waits for it to resume (Meteor 3.5), 0 for never (default 15000)',
  },
  'allowed-origins': {
    type: 'string',
    env: 'PERSEID_ALLOWED_ORIGINS',
    value: '<origins|*>',
    help: "Web pages allowed to connect besides the server's own host and loopback: comma-separated origins (https://app.example.com), or * for any",
  },
  'content-security-policy': {
    type: 'string',
    env: 'PERSEID_CONTENT_SECURITY_POLICY',
    value: '<policy|off>',
    help: "Content-Security-Policy of static files (default: the server's own scripts, styles and connections only)",
  },
};

const UNITS: Record<string, number> = { '': 1, k: 1024, kb: 1024, kib: 1024, m: 1024 ** 2, mb: 1024 ** 2, mib: 1024 ** 2, g: 1024 ** 3, gb: 1024 ** 3, gib: 1024 ** 3 };

/** A byte count such as `65536`, `64KiB`, `64MiB` or `1GiB` (K, M and G are powers of 1024). */
export function bytesOption(values: Parsed['values'], name: string): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  const match = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(String(raw).trim());
  const unit = match ? UNITS[match[2]!.toLowerCase()] : undefined;
  if (!match || unit === undefined || Number(match[1]) * unit < 1024) {
    throw new UsageError(`${optionName(values, name)} must be a byte count of at least 1KiB, in bytes or with K, M or G (KiB, MiB, GiB), e.g. 64MiB (got ${String(raw)})`);
  }
  return Math.floor(Number(match[1]) * unit);
}

/** The server options these flags (or their environment variables) set. */
export function readProtection(values: Parsed['values']): ServerOptions {
  const options: ServerOptions = {
    maxBufferedBytes: bytesOption(values, 'max-buffered'),
    maxTotalBufferedBytes: bytesOption(values, 'max-total-buffered'),
    maxSubscriptionsPerConnection: integerOption(values, 'max-subscriptions', 1, 1_000_000),
    maxTotalSubscriptions: integerOption(values, 'max-total-subscriptions', 1, 100_000_000),
    maxQueuedMessages: integerOption(values, 'max-queued-messages', 1, 10_000_000),
    maxConnectionsPerAddress: integerOption(values, 'max-connections-per-address', 0, 10_000_000),
    resumeGracePeriod: integerOption(values, 'resume-grace-ms', 0, 3_600_000),
  };
  const origins = values['allowed-origins'];
  if (origins !== undefined) {
    try {
      options.allowedOrigins = parseAllowedOrigins(String(origins));
    } catch (error) {
      throw new UsageError(`--allowed-origins: ${(error as Error).message}`);
    }
  }
  try {
    // Refused here, before the store opens, rather than by createServer in a stack trace.
    adminToken(process.env.PERSEID_ADMIN_TOKEN);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const policy = values['content-security-policy'];
  if (policy !== undefined) {
    try {
      options.contentSecurityPolicy = ['off', 'false', 'none'].includes(String(policy).toLowerCase()) ? false : checkContentSecurityPolicy(String(policy));
    } catch (error) {
      throw new UsageError(`--content-security-policy: ${(error as Error).message}`);
    }
  }
  return options;
}
