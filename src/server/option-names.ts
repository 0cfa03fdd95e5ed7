/**
 * createServer's options, checked for names it does not know: from JavaScript a
 * misspelt or guessed one (`port`, `dataDir`, `heartbeatIntervall`) was dropped
 * without a word and the server ran with the default.
 */
import { nearestName } from '../nearest-name.js';
import type { ServerOptions } from './app.js';

// A record, not a list, so the compiler fails when ServerOptions gains or loses an option this does not.
const KNOWN: Record<keyof ServerOptions, true> = {
  heartbeatInterval: true,
  heartbeatTimeout: true,
  handshakeTimeout: true,
  compression: true,
  maxMessageSize: true,
  maxBufferedBytes: true,
  maxTotalBufferedBytes: true,
  maxSubscriptionsPerConnection: true,
  maxTotalSubscriptions: true,
  maxQueuedMessages: true,
  resumeGracePeriod: true,
  resumeMaxMessages: true,
  resumeTailBytes: true,
  resumeMaxSessions: true,
  maxConnectionsPerAddress: true,
  allowedOrigins: true,
  httpForwardedCount: true,
  adminToken: true,
  adminEndpoints: true,
  contentSecurityPolicy: true,
  publicDir: true,
  clientVersion: true,
  role: true,
  logger: true,
};

/** Where the options people guess from `perseid start`'s flags are set instead. */
const ELSEWHERE: Record<string, string> = {
  port: 'the port is listen(port, host)',
  host: 'the address is listen(port, host)',
  dataDir: 'the embedded store is in PERSEID_DATA_DIR, or setDefaultDatabase(openDatabase({ dataDir }))',
};

export function checkServerOptionNames(options: object): void {
  const names = Object.keys(KNOWN);
  const unknown = Object.keys(options).find((key) => !Object.hasOwn(KNOWN, key));
  if (unknown === undefined) return;
  const near = nearestName(unknown, names);
  const hint = ELSEWHERE[unknown] ?? (near ? `did you mean ${near}?` : `the options are ${names.join(', ')}`);
  throw new TypeError(`createServer: unknown option ${JSON.stringify(unknown)} (${hint})`);
}
