/**
 * The client's options, checked for names it does not know: a misspelt one
 * (`hotcodepush`, a call's `noretry`) was dropped without a word and the
 * client ran with the default (a noRetry call ran twice), and one of Meteor's
 * the client lacks (`returnStubValue`) changed the outcome silently. Unlike
 * createServer's check (src/server/option-names.ts) this one does not measure
 * edit distances: the distance library would add 2 KiB to the browser bundle,
 * and the few names fit in the message.
 */
import type { DDPClientOptions } from './client.js';
import type { MethodOptions } from './methods.js';

// Records, not lists, so the compiler fails when the options gain or lose one these do not.
const CLIENT: Record<keyof DDPClientOptions, true> = {
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

const METHOD: Record<keyof MethodOptions, true> = {
  randomSeed: true,
  noRetry: true,
  wait: true,
  throwStubExceptions: true,
  onResultReceived: true,
};

function check(what: string, options: object, known: object): void {
  const unknown = Object.keys(options).find((key) => !Object.hasOwn(known, key));
  if (unknown === undefined) return;
  const names = Object.keys(known);
  // Case does not make a name another one: `hotcodepush` means hotCodePush.
  const near = names.find((name) => name.toLowerCase() === unknown.toLowerCase());
  throw new TypeError(`${what}: unknown option ${JSON.stringify(unknown)} (${near ? `did you mean ${near}?` : `the options are ${names.join(', ')}`})`);
}

export function checkClientOptionNames(options: object): void {
  check('DDPClient', options, CLIENT);
}

export function checkMethodOptionNames(options: object): void {
  check('apply', options, METHOD);
}
