/**
 * DDPClient's options, checked for names it does not know: a misspelt one
 * (`hotcodepush`, `autoreconnect`) was dropped without a word and the client
 * ran with the default. Unlike createServer's check (src/server/option-names.ts)
 * this one does not measure edit distances: the distance library would add
 * 2 KiB to the browser bundle, and the nine names fit in the message.
 */
import type { DDPClientOptions } from './client.js';

// A record, not a list, so the compiler fails when DDPClientOptions gains or loses an option this does not.
const KNOWN: Record<keyof DDPClientOptions, true> = {
  WebSocket: true,
  autoConnect: true,
  autoReconnect: true,
  heartbeatInterval: true,
  heartbeatTimeout: true,
  connectTimeout: true,
  versions: true,
  backoff: true,
  hotCodePush: true,
};

export function checkClientOptionNames(options: object): void {
  const unknown = Object.keys(options).find((key) => !Object.hasOwn(KNOWN, key));
  if (unknown === undefined) return;
  const names = Object.keys(KNOWN);
  // Case does not make a name another one: `hotcodepush` means hotCodePush.
  const near = names.find((name) => name.toLowerCase() === unknown.toLowerCase());
  throw new TypeError(`DDPClient: unknown option ${JSON.stringify(unknown)} (${near ? `did you mean ${near}?` : `the options are ${names.join(', ')}`})`);
}
