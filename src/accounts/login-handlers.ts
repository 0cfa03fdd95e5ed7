/**
 * The two ways `login` proves who is calling, as Meteor's handlers do: a
 * password (`{user: {username|email|id}, password}`) and a resume token
 * (`{resume: token}`). Each returns undefined for options that are not its
 * kind, or a result: the user's id, and/or the error that failed the attempt.
 */
import type { Collection } from '../collections/collection.js';
import type { DDPError } from '../ddp/errors.js';
import { check, Match, type Pattern } from '../validation/check.js';
import { AccountsErrors, credentialsError } from './errors.js';
import { hasPassword, type PasswordHasher, type PasswordInput } from './password.js';
import { hashLoginToken, type ResumeTokens, type StampedToken } from './resume-tokens.js';
import { findUserBy, type User } from './users.js';

export interface LoginResult {
  type: string;
  userId?: string;
  error?: unknown;
  /** An existing token the login continues with (resume), instead of a new one. */
  stamped?: StampedToken;
}

export interface LoginContext {
  users: Collection<User>;
  tokens: ResumeTokens;
  ambiguous: boolean;
  hasher: PasswordHasher;
  passwordPattern: Pattern;
}

const NonEmptyString = Match.Where((x) => typeof x === 'string' && x.length > 0);
/**
 * A username or email address as a client may send it: longer ones are refused
 * before they become a case-insensitive lookup (a 100,000-character name made a
 * regular expression too large to compile).
 */
export const MAX_IDENTIFIER_LENGTH = 256;
export const Identifier = Match.Where((x) => typeof x === 'string' && x.length > 0 && x.length <= MAX_IDENTIFIER_LENGTH);

/** `{id}`, `{username}` or `{email}`: exactly one. */
export const userQueryPattern = Match.Where((user) => {
  check(user, { id: Match.Optional(NonEmptyString), username: Match.Optional(Identifier), email: Match.Optional(Identifier) });
  if (Object.keys(user as object).length !== 1) throw new Match.Error('User property must have exactly one field');
  return true;
});

export type UserQuery = { id: string } | { username: string } | { email: string };

export async function findUserByQuery(users: Collection<User>, query: UserQuery): Promise<User | undefined> {
  if ('id' in query) return users.findOneAsync({ _id: query.id });
  if ('username' in query) return findUserBy(users, 'username', query.username);
  return findUserBy(users, 'emails.address', query.email);
}

/**
 * Verifies `password` against the user's hash; re-hashes it in the background when the algorithm or its cost changed.
 * `from`, here and below, is the caller's client address, with which the hashing takes turns (see password.ts).
 */
export async function passwordMatches(ctx: LoginContext, user: User, password: PasswordInput, from?: string): Promise<boolean> {
  const stored = user.services?.password;
  const { ok, rehash } = await ctx.hasher.verify(password, stored, from);
  if (rehash) {
    // Only if the hash is still the one just verified (a password change meanwhile wins).
    const current = stored?.argon2 ? { 'services.password.argon2': stored.argon2 } : { 'services.password.bcrypt': stored?.bcrypt };
    void ctx.hasher
      .fields(password, from)
      .then(({ set, unset }) => ctx.users.updateAsync({ _id: user._id, ...current }, { $set: set, $unset: unset }))
      .catch(() => undefined); // tried again at the next login
  }
  return ok;
}

export async function passwordHandler(ctx: LoginContext, options: Record<string, unknown>, from?: string): Promise<LoginResult | undefined> {
  if (!options.password) return undefined;
  check(options, { user: userQueryPattern, password: ctx.passwordPattern, code: Match.Optional(NonEmptyString) });
  const user = await findUserByQuery(ctx.users, options.user as UserQuery);
  if (!user || !hasPassword(user.services?.password)) {
    // As slow as a wrong password: a fast refusal would tell strangers which accounts do not exist.
    await ctx.hasher.decoy(options.password as PasswordInput, from);
    throw credentialsError(ctx.ambiguous, user ? AccountsErrors.noPasswordSet : AccountsErrors.userNotFound);
  }
  if (!(await passwordMatches(ctx, user, options.password as PasswordInput, from))) {
    return { type: 'password', userId: user._id, error: credentialsError(ctx.ambiguous, AccountsErrors.incorrectPassword) };
  }
  return { type: 'password', userId: user._id };
}

export async function resumeHandler(ctx: LoginContext, options: Record<string, unknown>): Promise<LoginResult | undefined> {
  if (!options.resume) return undefined;
  check(options.resume, String);
  const token = options.resume as string;
  const hashedToken = hashLoginToken(token);
  let user = await ctx.users.findOneAsync({ 'services.resume.loginTokens.hashedToken': hashedToken });
  let when = user?.services?.resume?.loginTokens?.find((t) => t.hashedToken === hashedToken)?.when;
  if (!user) {
    // A token from before Meteor hashed them: accept it once and store its hash instead.
    user = await ctx.users.findOneAsync({ 'services.resume.loginTokens.token': token });
    when = user?.services?.resume?.loginTokens?.find((t) => t.token === token)?.when;
    if (user && when) {
      await ctx.users.updateAsync(
        { _id: user._id, 'services.resume.loginTokens.token': token },
        { $addToSet: { 'services.resume.loginTokens': { hashedToken, when } } },
      );
      await ctx.users.updateAsync({ _id: user._id }, { $pull: { 'services.resume.loginTokens': { token } } });
    }
  }
  if (!user || !when) return { type: 'resume', error: AccountsErrors.loggedOutByServer() };
  if (ctx.tokens.expiresAt(when).getTime() < Date.now()) return { type: 'resume', userId: user._id, error: AccountsErrors.sessionExpired() };
  return { type: 'resume', userId: user._id, stamped: { token, when: new Date(when) } };
}

/** Runs the handlers in Meteor's order; an exception becomes the attempt's error. */
export async function runLoginHandlers(ctx: LoginContext, options: Record<string, unknown>, from?: string): Promise<LoginResult> {
  for (const [type, handler] of [['resume', resumeHandler], ['password', passwordHandler]] as const) {
    let result: LoginResult | undefined;
    try {
      result = await handler(ctx, options, from);
    } catch (error) {
      result = { type, error };
    }
    if (result) return result;
  }
  return { type: 'unknown', error: AccountsErrors.unrecognizedLogin() as DDPError };
}
