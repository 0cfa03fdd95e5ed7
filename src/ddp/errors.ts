/**
 * Errors in Meteor's serialized `Meteor.Error` shape, the form every DDP client
 * expects in `result.error` and `nosub.error`, and the catalogue of every error
 * a client can receive: each is defined once here or beside the code that
 * raises it (`defineError`), with a stable id listed in
 * docs/reference/errors.md (a test fails when the page and the catalogue differ).
 */

export interface SerializedError {
  isClientSafe: true;
  error: string | number;
  reason?: string;
  details?: unknown;
  message: string;
  errorType: 'Meteor.Error';
}

/** An error meant for the client; thrown from a method or publication it is sent as is. */
export class DDPError extends Error {
  readonly isClientSafe = true;
  readonly errorType = 'Meteor.Error';

  constructor(
    readonly error: string | number,
    readonly reason?: string,
    readonly details?: unknown,
  ) {
    super(reason ? `${reason} [${error}]` : `[${error}]`);
    this.name = 'DDPError';
  }

  toJSON(): SerializedError {
    const out: SerializedError = {
      isClientSafe: true,
      error: this.error,
      message: this.message,
      errorType: 'Meteor.Error',
    };
    if (this.reason !== undefined) out.reason = this.reason;
    if (this.details !== undefined) out.details = this.details;
    return out;
  }

  static fromJSON(value: unknown): DDPError {
    const v = (value ?? {}) as Partial<SerializedError>;
    const code = typeof v.error === 'string' || typeof v.error === 'number' ? v.error : 500;
    return new DDPError(code, typeof v.reason === 'string' ? v.reason : undefined, v.details);
  }
}

interface MaybeClientSafe {
  isClientSafe?: unknown;
  error?: unknown;
  reason?: unknown;
  details?: unknown;
  sanitizedError?: unknown;
}

function asClientSafe(value: unknown): DDPError | undefined {
  if (value instanceof DDPError) return value;
  const v = value as MaybeClientSafe | null;
  if (typeof v === 'object' && v !== null && v.isClientSafe === true) {
    const code = typeof v.error === 'string' || typeof v.error === 'number' ? v.error : 500;
    return new DDPError(code, typeof v.reason === 'string' ? v.reason : undefined, v.details);
  }
  return undefined;
}

/**
 * What the client may see of an exception: a client-safe error as it is, its
 * `sanitizedError` if it has a client-safe one, otherwise a bare 500.
 */
export function toClientError(value: unknown): { error: DDPError; expected: boolean } {
  const safe = asClientSafe(value);
  if (safe) return { error: safe, expected: true };
  const sanitized = asClientSafe((value as MaybeClientSafe | null)?.sanitizedError);
  // `clientFault`: the client's mistake (a Match failure), not the server's; not logged as a failure.
  if (sanitized) return { error: sanitized, expected: (value as { clientFault?: unknown }).clientFault === true };
  return { error: Errors.internal(), expected: false };
}

/**
 * Where an error is met: by a client in a method's `result`, a subscription's
 * `nosub`, a DDP `error` message (the message it sent was refused), or the
 * code and reason of the connection's close; by app code as an exception
 * thrown from Perseid's API (`thrown`).
 */
export type ErrorChannel = 'result' | 'nosub' | 'error' | 'close' | 'thrown';

export interface CataloguedError {
  /** Stable name, e.g. `METHOD_NOT_FOUND`; the anchor on the errors page. */
  readonly id: string;
  readonly channels: readonly ErrorChannel[];
  /** The `error` field (a number like HTTP's, or a string), or the close code. */
  readonly code: string | number;
  /** The reason as sent; `{name}` marks a part filled in per occurrence. */
  readonly reason: string;
}

const catalogue = new Map<string, CataloguedError>();

function register(entry: CataloguedError): void {
  if (catalogue.has(entry.id)) throw new Error(`Error ${entry.id} is defined twice`);
  catalogue.set(entry.id, entry);
}

function fill(template: string, values: Record<string, string | number> = {}): string {
  return template.replace(/\{(\w+)\}/g, (_m, key: string) => String(values[key] ?? `{${key}}`));
}

export interface ErrorFactory extends CataloguedError {
  (values?: Record<string, string | number>, details?: unknown): DDPError;
}

/** A client-safe error sent in `result` or `nosub`; call the result (with the template's values) to make one. */
export function defineError(
  id: string,
  code: string | number,
  reason: string,
  channels: readonly ErrorChannel[] = ['result', 'nosub'],
): ErrorFactory {
  const entry = { id, channels, code, reason };
  register(entry);
  const make = (values?: Record<string, string | number>, details?: unknown) => new DDPError(code, fill(reason, values), details);
  return Object.assign(make, entry);
}

/** The reason of a DDP `error` message: the server refused a message the client sent. */
export function defineProtocolError(id: string, reason: string): (values?: Record<string, string | number>) => string {
  register({ id, channels: ['error'], code: 'error', reason });
  return (values) => fill(reason, values);
}

/** A close code and reason the server ends a connection with. */
export function defineCloseReason(id: string, code: number, reason: string): { code: number; reason: string } {
  register({ id, channels: ['close'], code, reason });
  return { code, reason };
}

/** An exception Perseid's API throws to app code (not sent to clients as it is). */
export function defineThrownError(id: string, code: string | number, reason: string): CataloguedError {
  const entry = { id, channels: ['thrown'] as const, code, reason };
  register(entry);
  return entry;
}

/** Every catalogued error defined by the modules loaded so far. */
export function errorCatalogue(): CataloguedError[] {
  return [...catalogue.values()];
}

/** The generic errors of any method or publication. */
export const Errors = {
  internal: defineError('INTERNAL_SERVER_ERROR', 500, 'Internal server error'),
  methodNotFound: defineError('METHOD_NOT_FOUND', 404, "Method '{name}' not found", ['result']),
  subscriptionNotFound: defineError('SUBSCRIPTION_NOT_FOUND', 404, "Subscription '{name}' not found", ['nosub']),
};
