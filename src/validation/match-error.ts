/**
 * A value that does not match what a method or publication expects. The
 * server's log gets the detail; the client gets only Meteor's sanitized
 * 400 "Match failed", so a mismatch never leaks the shape of the checks.
 */
import { defineError, type DDPError } from '../ddp/errors.js';

export const MATCH_FAILED = defineError('MATCH_FAILED', 400, 'Match failed');

export class MatchError extends Error {
  /** What the client receives (see toClientError). */
  readonly sanitizedError: DDPError = MATCH_FAILED();
  /** A client's mistake, not the server's: not logged as a failure. */
  readonly clientFault = true;

  constructor(
    /** What did not match, e.g. "Expected string, got number". */
    readonly detail: string,
    /** Where, e.g. "user.email" (empty for the value itself). */
    readonly path = '',
  ) {
    super(`Match error: ${detail}${path ? ` in field ${path}` : ''}`);
    this.name = 'Match.Error';
  }
}
