/**
 * Errors in Meteor's serialized `Meteor.Error` shape, the form every DDP client
 * expects in `result.error` and `nosub.error`.
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
  if (sanitized) return { error: sanitized, expected: false };
  return { error: new DDPError(500, 'Internal server error'), expected: false };
}
