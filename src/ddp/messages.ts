/**
 * DDP message shapes and their validation. Only `fields`, `params` and `result`
 * carry EJSON; everything else is plain JSON (DDP notes §1.1).
 */
import { nestsDeeperThan } from './depth.js';
import { fromJSONValue, type JSONObject } from './ejson.js';
import { defineProtocolError, type SerializedError } from './errors.js';

/** Deepest nesting of arrays and objects a client message may have (MongoDB's documents stop at 100). */
export const MAX_DEPTH = 128;
/** A refused message is echoed back as `offendingMessage` only when its text is at most this long. */
export const ECHO_LIMIT = 1024;

/** The `error` messages a client gets for a message the server cannot take. */
export const ProtocolErrors = {
  badRequest: defineProtocolError('BAD_REQUEST', 'Bad request'),
  parseError: defineProtocolError('PARSE_ERROR', 'Parse error'),
  malformedSubscription: defineProtocolError('MALFORMED_SUBSCRIPTION', 'Malformed subscription'),
  malformedUnsubscription: defineProtocolError('MALFORMED_UNSUBSCRIPTION', 'Malformed unsubscription'),
  malformedMethod: defineProtocolError('MALFORMED_METHOD', 'Malformed method invocation'),
  mustConnectFirst: defineProtocolError('MUST_CONNECT_FIRST', 'Must connect first'),
  alreadyConnected: defineProtocolError('ALREADY_CONNECTED', 'Already connected'),
  messageTooLarge: defineProtocolError('MESSAGE_TOO_LARGE', 'Message too large ({bytes} bytes; the limit is {limit})'),
  tooManyWaiting: defineProtocolError('TOO_MANY_WAITING', 'Too many messages waiting to run'),
  tooDeep: defineProtocolError('TOO_DEEP', 'Message nested too deeply (more than {limit} levels)'),
  binaryFrame: defineProtocolError('BINARY_FRAME', 'Binary frames are not DDP: send each message as a text frame'),
  tooManyConnections: defineProtocolError('TOO_MANY_CONNECTIONS', 'Too many connections from your address (the limit is {limit})'),
};

export const SUPPORTED_VERSIONS = ['1', 'pre2', 'pre1'] as const;
export type DDPVersion = (typeof SUPPORTED_VERSIONS)[number];

export interface ConnectMessage {
  msg: 'connect';
  version: string;
  support: string[];
  /** The session to resume (Meteor 3.5), with how many messages of it the client received. */
  session?: string;
  receivedCount?: number;
}
/** Meteor 3.5: the client is leaving on purpose; the server ends the session at once (no resumption). */
export interface DisconnectMessage {
  msg: 'disconnect';
}
export interface PingMessage {
  msg: 'ping';
  id?: string;
}
export interface PongMessage {
  msg: 'pong';
  id?: string;
}
export interface SubMessage {
  msg: 'sub';
  id: string;
  name: string;
  params: unknown[];
}
export interface UnsubMessage {
  msg: 'unsub';
  id: string;
}
export interface MethodMessage {
  msg: 'method';
  id: string;
  method: string;
  params: unknown[];
  randomSeed?: string;
}

export type ClientMessage = ConnectMessage | PingMessage | PongMessage | SubMessage | UnsubMessage | MethodMessage | DisconnectMessage;

export interface ConnectedMessage {
  msg: 'connected';
  session: string;
}
export interface FailedMessage {
  msg: 'failed';
  version: string;
}
export interface NosubMessage {
  msg: 'nosub';
  id: string;
  error?: SerializedError;
}
export interface AddedMessage {
  msg: 'added';
  collection: string;
  id: string;
  fields?: JSONObject;
}
export interface ChangedMessage {
  msg: 'changed';
  collection: string;
  id: string;
  fields?: JSONObject;
  cleared?: string[];
}
export interface RemovedMessage {
  msg: 'removed';
  collection: string;
  id: string;
}
export interface AddedBeforeMessage {
  msg: 'addedBefore';
  collection: string;
  id: string;
  fields?: JSONObject;
  before: string | null;
}
export interface MovedBeforeMessage {
  msg: 'movedBefore';
  collection: string;
  id: string;
  before: string | null;
}
export interface ReadyMessage {
  msg: 'ready';
  subs: string[];
}
export interface ResultMessage {
  msg: 'result';
  id: string;
  error?: SerializedError;
  result?: unknown;
}
export interface UpdatedMessage {
  msg: 'updated';
  methods: string[];
}
export interface ErrorMessage {
  msg: 'error';
  reason: string;
  offendingMessage?: unknown;
}

export type ServerMessage =
  | ConnectedMessage
  | FailedMessage
  | PingMessage
  | PongMessage
  | NosubMessage
  | AddedMessage
  | ChangedMessage
  | RemovedMessage
  | AddedBeforeMessage
  | MovedBeforeMessage
  | ReadyMessage
  | ResultMessage
  | UpdatedMessage
  | ErrorMessage;

/** Why a client message was refused, in Meteor's words, with the message when it is small enough to echo. */
export interface Rejection {
  reason: string;
  offendingMessage?: unknown;
}

/** A valid message, with what to echo should the session refuse it anyway (absent when the message is large). */
export type ParseOutcome = { message: ClientMessage; echo?: unknown } | { rejection: Rejection };

const isString = (v: unknown): v is string => typeof v === 'string';

function isPlainRecord(value: unknown): value is JSONObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Parses and validates one frame from a client. Invalid JSON is a `Bad request`,
 * nesting beyond MAX_DEPTH `Message nested too deeply` (checked on the text,
 * before parsing), undecodable EJSON a `Parse error`, wrong field types a
 * `Malformed ...` error. Only a message of at most ECHO_LIMIT characters is
 * echoed back, so a refusal never costs more than the message did.
 */
export function parseClientMessage(text: string): ParseOutcome {
  if (nestsDeeperThan(text, MAX_DEPTH)) return { rejection: { reason: ProtocolErrors.tooDeep({ limit: MAX_DEPTH }) } };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { rejection: { reason: ProtocolErrors.badRequest() } };
  }
  if (!isPlainRecord(raw)) return { rejection: { reason: ProtocolErrors.badRequest() } };
  const outcome = validate(raw);
  if (text.length > ECHO_LIMIT) {
    if ('rejection' in outcome) delete outcome.rejection.offendingMessage;
    return outcome;
  }
  return 'rejection' in outcome ? outcome : { message: outcome.message, echo: raw };
}

function validate(raw: JSONObject): ParseOutcome {
  switch (raw.msg) {
    case 'connect':
      return { message: raw as unknown as ConnectMessage };
    case 'ping':
    case 'pong':
      if ('id' in raw && !isString(raw.id)) return { rejection: { reason: ProtocolErrors.badRequest(), offendingMessage: raw } };
      return { message: raw as unknown as PingMessage | PongMessage };
    case 'sub': {
      if (!isString(raw.id) || !isString(raw.name) || ('params' in raw && !Array.isArray(raw.params))) {
        return { rejection: { reason: ProtocolErrors.malformedSubscription(), offendingMessage: raw } };
      }
      const params = decodeParams(raw);
      if (!params) return { rejection: { reason: ProtocolErrors.parseError(), offendingMessage: raw } };
      return { message: { msg: 'sub', id: raw.id, name: raw.name, params } };
    }
    case 'unsub':
      if (!isString(raw.id)) return { rejection: { reason: ProtocolErrors.malformedUnsubscription(), offendingMessage: raw } };
      return { message: { msg: 'unsub', id: raw.id } };
    case 'method': {
      if (
        !isString(raw.id) ||
        !isString(raw.method) ||
        ('params' in raw && !Array.isArray(raw.params)) ||
        ('randomSeed' in raw && !isString(raw.randomSeed))
      ) {
        return { rejection: { reason: ProtocolErrors.malformedMethod(), offendingMessage: raw } };
      }
      const params = decodeParams(raw);
      if (!params) return { rejection: { reason: ProtocolErrors.parseError(), offendingMessage: raw } };
      const message: MethodMessage = { msg: 'method', id: raw.id, method: raw.method, params };
      if (isString(raw.randomSeed)) message.randomSeed = raw.randomSeed;
      return { message };
    }
    default:
      return { rejection: { reason: ProtocolErrors.badRequest(), offendingMessage: raw } };
  }
}

function decodeParams(raw: JSONObject): unknown[] | undefined {
  if (raw.params === undefined) return [];
  try {
    return fromJSONValue(raw.params) as unknown[];
  } catch {
    return undefined;
  }
}

/** Checks a `connect` and picks the version: Meteor's rules (DDP notes §1.2). */
export function negotiateVersion(
  message: ConnectMessage,
  serverVersions: readonly string[] = SUPPORTED_VERSIONS,
): { accepted: DDPVersion } | { failed: string } {
  const { version, support } = message;
  const fallback = serverVersions[0] ?? '1';
  if (!isString(version) || !Array.isArray(support) || !support.every(isString) || !support.includes(version)) {
    return { failed: fallback };
  }
  const best = support.find((v) => serverVersions.includes(v)) ?? fallback;
  if (best !== version) return { failed: best };
  return { accepted: version as DDPVersion };
}

/**
 * Parses a server frame on the client side; returns undefined for anything that
 * is not a DDP message (including Meteor's legacy `{"server_id": ...}` greeting).
 */
export function parseServerMessage(text: string): ServerMessage | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isPlainRecord(raw) || !isString(raw.msg)) return undefined;
  if (raw.fields !== undefined) raw.fields = fromJSONValue(raw.fields);
  if (raw.result !== undefined) raw.result = fromJSONValue(raw.result);
  if (raw.params !== undefined) raw.params = fromJSONValue(raw.params);
  if (Array.isArray(raw.cleared)) {
    const fields = (isPlainRecord(raw.fields) ? raw.fields : (raw.fields = {})) as JSONObject;
    for (const key of raw.cleared) if (isString(key)) fields[key] = undefined;
    delete raw.cleared;
  }
  return raw as unknown as ServerMessage;
}
