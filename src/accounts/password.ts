/**
 * Passwords as Meteor stores them: the client sends the SHA-256 hex digest of
 * the password (or the password itself, which the server digests), and the
 * server keeps bcrypt of that digest at 10 rounds in
 * `services.password.bcrypt`, so a Meteor app's users log in unchanged.
 * bcryptjs: pure JavaScript, nothing to compile on install.
 */
import { createHash } from 'node:crypto';
import bcrypt from 'bcryptjs';
import { Match, type Pattern } from '../validation/check.js';

/** What a client may send as a password: the plain string, or `{digest, algorithm: 'sha-256'}`. */
export type PasswordInput = string | { digest: string; algorithm: 'sha-256' };

export const DEFAULT_BCRYPT_ROUNDS = 10;

/** Meteor's passwordValidator, with its intended 256-character cap on plain strings enforced. */
export function passwordPattern(maxLength: number): Pattern {
  return Match.OneOf(
    Match.Where((value) => typeof value === 'string' && value.length <= maxLength),
    { digest: Match.Where((value) => typeof value === 'string' && value.length === 64), algorithm: Match.OneOf('sha-256') },
  );
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The string bcrypt sees: the SHA-256 hex digest, as the client sent it or made here. */
export function passwordDigest(password: PasswordInput): string {
  return typeof password === 'string' ? sha256Hex(password) : password.digest;
}

export function hashPassword(password: PasswordInput, rounds = DEFAULT_BCRYPT_ROUNDS): Promise<string> {
  return bcrypt.hash(passwordDigest(password), rounds);
}

export function checkPassword(password: PasswordInput, hash: string): Promise<boolean> {
  return bcrypt.compare(passwordDigest(password), hash);
}

/** Rounds a stored hash was made with (`$2b$10$...` → 10); NaN for something else. */
export function roundsOf(hash: string): number {
  return Number(hash.substring(4, 6));
}
