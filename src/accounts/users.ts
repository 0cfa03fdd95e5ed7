/**
 * The `users` collection with Meteor's document shape and indexes:
 * `{_id, createdAt, username?, emails?: [{address, verified}], profile?,
 * services: {password: {bcrypt}, resume: {loginTokens: [{hashedToken, when}]},
 * email: {verificationTokens}}}`. Through `Collection`, so the embedded store
 * and MongoDB both hold it, and a Meteor app's collection can be used as is.
 */
import { Collection } from '../collections/collection.js';
import type { Database } from '../collections/database.js';
import type { Document } from '../data/types.js';

export interface UserEmail {
  address: string;
  verified: boolean;
}

export interface LoginToken {
  hashedToken?: string;
  /** Meteor before 0.7.2 stored tokens unhashed; such a token is upgraded when used. */
  token?: string;
  when: Date;
}

export interface EmailToken {
  token: string;
  address?: string;
  email?: string;
  when: Date;
  reason?: 'reset' | 'enroll';
}

export interface User extends Document {
  _id: string;
  createdAt?: Date;
  username?: string;
  emails?: UserEmail[];
  profile?: Record<string, unknown>;
  services?: {
    password?: { bcrypt?: string; argon2?: string; reset?: EmailToken; enroll?: EmailToken };
    resume?: { loginTokens?: LoginToken[] };
    email?: { verificationTokens?: EmailToken[] };
    [service: string]: unknown;
  };
}

/** Meteor's indexes on `users` (accounts-base, accounts-password), with MongoDB's default names. */
const INDEXES: Array<[string, { unique?: boolean; sparse: true }]> = [
  ['username', { unique: true, sparse: true }],
  ['emails.address', { unique: true, sparse: true }],
  ['services.resume.loginTokens.hashedToken', { unique: true, sparse: true }],
  ['services.resume.loginTokens.token', { unique: true, sparse: true }],
  ['services.resume.haveLoginTokensToDelete', { sparse: true }],
  ['services.resume.loginTokens.when', { sparse: true }],
  ['services.password.reset.token', { unique: true, sparse: true }],
  ['services.password.reset.when', { sparse: true }],
  ['services.password.enroll.token', { unique: true, sparse: true }],
  ['services.password.enroll.when', { sparse: true }],
  ['services.email.verificationTokens.token', { unique: true, sparse: true }],
];

export function usersCollection(database?: Database | Promise<Database>, name = 'users'): Collection<User> {
  return new Collection<User>(name, database ? { database } : {});
}

export async function ensureUserIndexes(users: Collection<User>): Promise<void> {
  for (const [field, options] of INDEXES) await users.createIndexAsync({ [field]: 1 }, options);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * Meteor's lookup: an exact match first; failing that, a case-insensitive one
 * that counts only when it finds exactly one user.
 */
export async function findUserBy(users: Collection<User>, field: 'username' | 'emails.address', value: string): Promise<User | undefined> {
  const exact = await users.findOneAsync({ [field]: value });
  if (exact) return exact;
  const matches = await users.find(caseInsensitive(field, value), { limit: 2 }).fetchAsync();
  return matches.length === 1 ? matches[0] : undefined;
}

export function caseInsensitive(field: string, value: string): Document {
  return { [field]: new RegExp(`^${escapeRegExp(value)}$`, 'i') };
}

/** Whether another user than `ownId` has `value` in `field`, ignoring case (Meteor's duplicate check). */
export async function takenIgnoringCase(users: Collection<User>, field: 'username' | 'emails.address', value: string, ownId?: string): Promise<boolean> {
  const matches = await users.find(caseInsensitive(field, value), { limit: 2, fields: { _id: 1 } }).fetchAsync();
  return matches.length > 0 && (!ownId || matches.length > 1 || matches[0]!._id !== ownId);
}

/** What a duplicate-key error from either driver says about which field clashed. */
export function duplicateField(error: unknown): 'username' | 'emails.address' | undefined {
  const e = error as { code?: unknown; message?: unknown; errmsg?: unknown } | null;
  if (!e || e.code !== 11000) return undefined;
  const text = `${String(e.errmsg ?? '')} ${String(e.message ?? '')}`;
  if (text.includes('emails.address')) return 'emails.address';
  if (text.includes('username')) return 'username';
  return undefined;
}
