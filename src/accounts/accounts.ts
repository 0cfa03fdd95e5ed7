/**
 * Accounts on a Perseid server, as a plugin over its public API: Meteor's
 * account methods (`login`, `logout`, `getNewToken`, `removeOtherTokens`,
 * `createUser`, `changePassword`, `forgotPassword`, `resetPassword`,
 * `verifyEmail`) with Meteor's parameters, results and errors; the logged-in
 * user's own document published to every connection; the hooks Meteor apps
 * use; and Meteor's default rate limit on login methods.
 */
import type { Collection } from '../collections/collection.js';
import type { Database } from '../collections/database.js';
import { Random } from '../ddp/random.js';
import { KeyedLock } from '../keyed-lock.js';
import type { Logger } from '../log.js';
import { rateLimiter } from '../rate-limit/index.js';
import { addressGroup } from '../server/address-group.js';
import type { PerseidServer } from '../server/app.js';
import type { ConnectionHandle } from '../server/connection-handle.js';
import type { MethodInvocation } from '../server/method-invocation.js';
import type { Subscription } from '../server/subscription.js';
import { check, Match, type Pattern } from '../validation/check.js';
import { EmailTokens, hashEmailToken, type EmailTokenSettings } from './email-tokens.js';
import { AccountsErrors, credentialsError, invalidLoginToken, notLoggedIn } from './errors.js';
import { KeyLimit, type RateLimitWindow } from './key-limit.js';
import { Identifier, runLoginHandlers, passwordMatches, type LoginContext, type LoginResult } from './login-handlers.js';
import { LoginSessions } from './login-sessions.js';
import { checkProfile, MAX_PROFILE_BYTES } from './profile.js';
import { logMailer, smtpMailer, type Mailer } from './mailer.js';
import { DEFAULT_BCRYPT_ROUNDS, hasPassword, METEOR_ARGON2, PasswordHasher, passwordPattern, type Argon2Params, type PasswordInput } from './password.js';
import { hashLoginToken, ResumeTokens, stampedToken, tokenLifetimeMs, type StampedToken } from './resume-tokens.js';
import { duplicateField, ensureUserIndexes, findUserBy, takenIgnoringCase, usersCollection, type User } from './users.js';

export interface AccountsOptions {
  /** Where `users` lives; default: the server's default database. */
  database?: Database | Promise<Database>;
  /** Refuse `createUser` from clients (403 "Signups forbidden"); the server can still create users. */
  forbidClientAccountCreation?: boolean;
  /** One message for every credential failure, so strangers cannot probe for accounts (default true, as Meteor 3). */
  ambiguousErrorMessages?: boolean;
  /** Login token lifetime in days (default 90; null: never expire). */
  loginExpirationInDays?: number | null;
  /** Login token lifetime in ms; wins over loginExpirationInDays. */
  loginExpiration?: number;
  /** Login tokens one user keeps at most (default 10,000); a login beyond it logs out the user's oldest token. */
  maxLoginTokensPerUser?: number;
  passwordResetTokenExpirationInDays?: number;
  passwordEnrollTokenExpirationInDays?: number;
  /** bcrypt cost (default 10, Meteor's); hashes of another cost are redone at login. */
  bcryptRounds?: number;
  /** Hash new passwords with argon2 (Meteor 3.1's option; needs the optional @node-rs/argon2); bcrypt hashes move over at login. */
  argon2Enabled?: boolean;
  /** argon2 parameters; Meteor's by default (argon2id, timeCost 2, memoryCost 19456, parallelism 1). */
  argon2?: Partial<Argon2Params>;
  /** Longest plain-string password accepted (default 256). */
  passwordMaxLength?: number;
  /** Extra fields of the user's own document published to them, besides username, emails and profile; exclusions (Meteor's `{services: 0}`) change nothing. */
  defaultFieldSelector?: Record<string, 0 | 1>;
  /** Mail a verification link (an enrollment link if it has no password) to the e-mail of each user the createUser method makes. */
  sendVerificationEmail?: boolean;
  /** The default rate limit on login, createUser, resetPassword and forgotPassword: Meteor's rule (5 calls per 10 s per connection) and addressRateLimit (default true). */
  defaultRateLimit?: boolean;
  /** The default limit's second part: calls to those methods per client address (an IPv6 /64) over all its connections, resume logins not counted (default 60 per minute; false: none). */
  addressRateLimit?: RateLimitWindow | false;
  /** Password reset e-mails forgotPassword sends to one address (default 3 per hour; false: no limit). */
  forgotPasswordLimit?: RateLimitWindow | false;
  /** Largest profile a client's createUser may give, in bytes of JSON (default 16 KiB). */
  maxProfileBytes?: number;
  /** The app's URL, for the links in e-mails (default ROOT_URL, else http://localhost:<the port the server listens on>, as Meteor's). */
  siteUrl?: string;
  /** The links in e-mails, as Meteor's `Accounts.urls` (default `<siteUrl>/#/reset-password/<token>`, `#/enroll-account/`, `#/verify-email/`). */
  urls?: EmailTokenSettings['urls'];
  /** SMTP URL for e-mails (default MAIL_URL); without one, e-mails are logged. */
  mailUrl?: string;
  /** Sends accounts e-mails; wins over mailUrl. */
  mailer?: Mailer;
  emailFrom?: string;
  /** How often expired tokens are purged (default 10 minutes). */
  purgeIntervalMs?: number;
}

/** A login attempt as the hooks see it (Meteor's shape). */
export interface LoginAttempt {
  type: string;
  allowed: boolean;
  error?: unknown;
  user?: User;
  connection: ConnectionHandle;
  methodName: string;
  methodArguments: unknown[];
}

export interface CreateUserOptions {
  username?: string;
  email?: string;
  password?: PasswordInput;
  profile?: Record<string, unknown>;
  [key: string]: unknown;
}

export interface LoginReply {
  id: string;
  token: string;
  tokenExpires: Date;
  type: string;
}

type Hook<T, R = unknown> = (value: T) => R | Promise<R>;

const LOGIN_METHODS = ['login', 'createUser', 'resetPassword', 'forgotPassword'];

/**
 * Per client address, over all its connections: Meteor's rule counts per connection only, so a client opening a new
 * connection every 5 calls created some 18,000 users a minute from one address (or tried as many passwords). Resume
 * logins are not counted: every client behind one NAT resumes at once when the server restarts, and a refused resume
 * logs a Meteor client out.
 */
const ADDRESS_RATE_LIMIT: RateLimitWindow = { numRequests: 60, intervalMs: 60_000 };
/** Reset mails to one address: each forgotPassword call from any connection or address mailed the victim again. */
const FORGOT_PASSWORD_LIMIT: RateLimitWindow = { numRequests: 3, intervalMs: 3_600_000 };

/**
 * How long a sign-up keeps its names from the others: one whose onCreateUser or validateNewUser hook never settles
 * (awaiting a service that hangs) kept every later sign-up for its name waiting, unanswered, until a restart. Past
 * this the next goes ahead, and the second check after the insert keeps two users from sharing the name.
 */
export const SIGNUP_HOLD_MS = 10_000;

/** Signups under way in this process, by the names they claim (case ignored, as the duplicate check does). */
const signups = new KeyedLock(SIGNUP_HOLD_MS);

/** The port the server listens on, once it does. */
function listeningPort(server: PerseidServer): number | undefined {
  const address = server.httpServer.address();
  return typeof address === 'object' && address !== null ? address.port : undefined;
}

export class Accounts {
  readonly users: Collection<User>;
  readonly tokens: ResumeTokens;
  private readonly sessions: LoginSessions;
  private readonly emailTokens: EmailTokens;
  private readonly log: Logger;
  private readonly ctx: LoginContext;
  private readonly options: AccountsOptions;
  private readonly passwordPattern: Pattern;
  private readonly maxProfileBytes: number;
  /** Login methods per client address; undefined when off or removed. */
  private addressLimit: KeyLimit | undefined;
  /** forgotPassword's mails per e-mail address; undefined when off. */
  private readonly resetMailLimit: KeyLimit | undefined;
  private onCreateUserHook: ((options: CreateUserOptions, user: User) => User | Promise<User>) | undefined;
  private readonly validateNewUserHooks: Array<Hook<User, boolean>> = [];
  private readonly validateLoginHooks: Array<Hook<LoginAttempt, boolean>> = [];
  private readonly loginHooks: Array<Hook<LoginAttempt>> = [];
  private readonly loginFailureHooks: Array<Hook<LoginAttempt>> = [];
  private readonly logoutHooks: Array<Hook<{ user?: User; connection: ConnectionHandle }>> = [];
  /** Resolves once the indexes exist; methods wait for it. */
  readonly ready: Promise<void>;

  constructor(
    private readonly server: PerseidServer,
    options: AccountsOptions = {},
  ) {
    this.options = options;
    this.log = server.log.child('accounts');
    this.users = usersCollection(options.database);
    const maxTokens = options.maxLoginTokensPerUser;
    if (maxTokens !== undefined && !(Number.isInteger(maxTokens) && maxTokens >= 1)) {
      throw new TypeError(`accounts: maxLoginTokensPerUser must be a whole number of at least 1 (got ${String(maxTokens)})`);
    }
    this.maxProfileBytes = options.maxProfileBytes ?? MAX_PROFILE_BYTES;
    if (!(Number.isInteger(this.maxProfileBytes) && this.maxProfileBytes >= 0)) {
      throw new TypeError(`accounts: maxProfileBytes must be a whole number of bytes (got ${String(options.maxProfileBytes)})`);
    }
    const perAddress = options.addressRateLimit ?? ADDRESS_RATE_LIMIT;
    if ((options.defaultRateLimit ?? true) && perAddress) this.addressLimit = new KeyLimit(server, 'login methods per client address', perAddress);
    const mails = options.forgotPasswordLimit ?? FORGOT_PASSWORD_LIMIT;
    if (mails) this.resetMailLimit = new KeyLimit(server, 'forgotPassword mails per e-mail address', mails);
    this.tokens = new ResumeTokens(this.users, tokenLifetimeMs(options), this.log, options.maxLoginTokensPerUser);
    this.sessions = new LoginSessions(this.users, this.log);
    this.passwordPattern = passwordPattern(options.passwordMaxLength ?? 256);
    const mailUrl = options.mailUrl ?? process.env.MAIL_URL;
    this.emailTokens = new EmailTokens(this.users, {
      siteUrl: () => options.siteUrl ?? process.env.ROOT_URL ?? `http://localhost:${listeningPort(server) ?? 3000}`,
      urls: options.urls,
      from: options.emailFrom ?? 'Accounts <no-reply@localhost>',
      resetDays: options.passwordResetTokenExpirationInDays ?? 3,
      enrollDays: options.passwordEnrollTokenExpirationInDays ?? 30,
      mailer: options.mailer ?? (mailUrl ? smtpMailer(mailUrl) : logMailer(this.log)),
    });
    this.ctx = {
      users: this.users,
      tokens: this.tokens,
      ambiguous: options.ambiguousErrorMessages ?? true,
      hasher: new PasswordHasher(options.bcryptRounds ?? DEFAULT_BCRYPT_ROUNDS, options.argon2Enabled ? { ...METEOR_ARGON2, ...options.argon2 } : undefined),
      passwordPattern: this.passwordPattern,
    };
    this.ready = Promise.all([ensureUserIndexes(this.users), this.ctx.hasher.ready()]).then(() => undefined);
    this.ready.catch((error: unknown) => this.log.error('could not create the users indexes', { error }));
    this.registerMethods();
    this.registerPublication();
    server.onConnection((connection) => connection.onClose(() => this.sessions.clear(connection.id)));
    if (options.defaultRateLimit ?? true) this.addDefaultRateLimit();
    this.tokens.startPurging(options.purgeIntervalMs, () => this.emailTokens.expire());
    server.onClose(() => this.stop());
  }

  // ---- hooks (Meteor's names) ----

  /** Builds the stored document from createUser's options (default: copies `profile`). */
  onCreateUser(hook: (options: CreateUserOptions, user: User) => User | Promise<User>): void {
    if (this.onCreateUserHook) throw new Error('Can only call onCreateUser once');
    this.onCreateUserHook = hook;
  }

  /** A new user is stored only if every hook returns true (else 403 "User validation failed"); a hook may throw its own error. */
  validateNewUser(hook: Hook<User, boolean>): void {
    this.validateNewUserHooks.push(hook);
  }

  /** Every login attempt passes each hook: false refuses it (403 "Login forbidden"); a thrown error refuses it with that error. */
  validateLoginAttempt(hook: Hook<LoginAttempt, boolean>): void {
    this.validateLoginHooks.push(hook);
  }

  onLogin(hook: Hook<LoginAttempt>): void {
    this.loginHooks.push(hook);
  }

  onLoginFailure(hook: Hook<LoginAttempt>): void {
    this.loginFailureHooks.push(hook);
  }

  onLogout(hook: Hook<{ user?: User; connection: ConnectionHandle }>): void {
    this.logoutHooks.push(hook);
  }

  /** Removes the default rate limit on login methods (Meteor's rule and the per-address limit). */
  removeDefaultRateLimit(): boolean {
    const hadAddressLimit = this.addressLimit !== undefined;
    this.addressLimit = undefined;
    if (!this.defaultRule) return hadAddressLimit;
    const removed = rateLimiter(this.server).removeRule(this.defaultRule);
    this.defaultRule = undefined;
    return removed;
  }

  // ---- server-side API ----

  /** Creates a user (no login, and no e-mail: the app sends one if it wants, as with Meteor's); returns its id. */
  createUser(options: CreateUserOptions): Promise<string> {
    return this.createUserFrom(options, undefined);
  }

  /** createUser for a client at `from`, with which hashing the password takes turns (see password.ts). */
  private async createUserFrom(options: CreateUserOptions, from: string | undefined): Promise<string> {
    await this.ready;
    check(options, Match.ObjectIncluding({ username: Match.Optional(Identifier), email: Match.Optional(Identifier), password: Match.Optional(this.passwordPattern) }));
    const { username, email, password } = options;
    if (!username && !email) throw AccountsErrors.needUsernameOrEmail();
    const user: User = { _id: '', services: {} };
    if (password) user.services!.password = await this.ctx.hasher.stored(password, from);
    return this.insertCheckingDuplicates(user, options);
  }

  /**
   * The createUser method's user (Meteor's createUserVerifyingEmail): with sendVerificationEmail, its address is
   * mailed a verification link, or an enrollment link when it has no password. Only the method mails: an app
   * creating users itself and then calling sendEnrollmentEmail would otherwise send two, the first one's link dead.
   */
  private async createUserVerifyingEmail(options: CreateUserOptions, from: string | undefined): Promise<string> {
    const userId = await this.createUserFrom(options, from);
    const { email, password } = options;
    if (email && this.options.sendVerificationEmail) {
      if (password) await this.emailTokens.sendVerification(userId, email);
      else await this.emailTokens.sendReset(userId, email, 'enroll');
    }
    return userId;
  }

  findUserByUsername(username: string): Promise<User | undefined> {
    return findUserBy(this.users, 'username', username);
  }

  findUserByEmail(email: string): Promise<User | undefined> {
    return findUserBy(this.users, 'emails.address', email);
  }

  /** Sets a user's password; by default logs out every connection of theirs (all tokens removed). */
  async setPassword(userId: string, password: PasswordInput, options: { logout?: boolean } = {}): Promise<void> {
    const { set, unset } = await this.ctx.hasher.fields(password);
    const modifier = { $set: { ...set, ...((options.logout ?? true) ? { 'services.resume.loginTokens': [] } : {}) }, $unset: { ...unset, 'services.password.reset': 1 } };
    if ((await this.users.updateAsync({ _id: userId }, modifier)) === 0) throw credentialsError(this.ctx.ambiguous, AccountsErrors.userNotFound);
  }

  sendResetPasswordEmail(userId: string, email?: string): Promise<string> {
    return this.emailTokens.sendReset(userId, email, 'reset');
  }

  sendEnrollmentEmail(userId: string, email?: string): Promise<string> {
    return this.emailTokens.sendReset(userId, email, 'enroll');
  }

  sendVerificationEmail(userId: string, address?: string): Promise<string> {
    return this.emailTokens.sendVerification(userId, address);
  }

  /** Connections logged in on this server now. */
  get loggedInConnections(): number {
    return this.sessions.size;
  }

  stop(): void {
    this.tokens.stopPurging();
    this.sessions.stopAll();
  }

  // ---- internals ----

  private defaultRule: string | undefined;

  private addDefaultRateLimit(): void {
    this.defaultRule = rateLimiter(this.server).addRule({ type: 'method', name: (name: string) => LOGIN_METHODS.includes(name), connectionId: () => true }, 5, 10000);
  }

  /** Counts a login method's call against its client's address (addressRateLimit). */
  private limitAddress(connection: ConnectionHandle): Promise<void> | undefined {
    return this.addressLimit?.hit(addressGroup(connection.clientAddress ?? ''));
  }

  private async insertCheckingDuplicates(user: User, options: CreateUserOptions): Promise<string> {
    const { username, email } = options;
    if (username) user.username = username;
    if (email) user.emails = [{ address: email, verified: false }];
    const checkDuplicates = async (ownId?: string) => {
      if (username && (await takenIgnoringCase(this.users, 'username', username, ownId))) throw credentialsError(this.ctx.ambiguous, AccountsErrors.usernameExists);
      if (email && (await takenIgnoringCase(this.users, 'emails.address', email, ownId))) throw credentialsError(this.ctx.ambiguous, AccountsErrors.emailExists);
    };
    // One signup per name at a time in this process: 20 at once as Alice, alice, ALICE... each found the others
    // on its second check and removed itself, so none of them got the name. Across servers the second check remains.
    const names = [username && `username:${username.toUpperCase()}`, email && `email:${email.toUpperCase()}`].filter((key): key is string => Boolean(key));
    return signups.run(names, async () => {
      await checkDuplicates();
      const userId = await this.insertUserDoc(options, user);
      try {
        // Again, in case another server inserted a user differing only in case meanwhile.
        await checkDuplicates(userId);
      } catch (error) {
        await this.users.removeAsync({ _id: userId });
        throw error;
      }
      return userId;
    });
  }

  private async insertUserDoc(options: CreateUserOptions, draft: User): Promise<string> {
    const { _id: _drop, ...rest } = draft;
    let user: User = { createdAt: new Date(), _id: Random.id(), ...rest };
    if (this.onCreateUserHook) user = await this.onCreateUserHook(options, user);
    else if (options.profile) user.profile = options.profile;
    for (const hook of this.validateNewUserHooks) {
      if (!(await hook(user))) throw AccountsErrors.userValidationFailed();
    }
    try {
      return (await this.users.insertAsync(user)) as string;
    } catch (error) {
      const field = duplicateField(error);
      if (field === 'emails.address') throw AccountsErrors.emailExists();
      if (field === 'username') throw AccountsErrors.usernameExists();
      throw error;
    }
  }

  /** Meteor's `_attemptLogin`: validate hooks, then log the connection in (or fail with the attempt's error). */
  private async attemptLogin(invocation: MethodInvocation, methodName: string, methodArguments: unknown[], result: LoginResult): Promise<LoginReply> {
    const user = result.userId ? await this.users.findOneAsync({ _id: result.userId }) : undefined;
    const attempt: LoginAttempt = {
      type: result.type || 'unknown',
      allowed: Boolean(result.userId && !result.error),
      methodName,
      methodArguments,
      connection: invocation.connection,
    };
    if (result.error) attempt.error = result.error;
    if (user) attempt.user = user;
    for (const hook of this.validateLoginHooks) {
      let ok: boolean;
      try {
        ok = await hook({ ...attempt });
      } catch (error) {
        attempt.allowed = false;
        attempt.error = error;
        continue;
      }
      if (!ok) {
        attempt.allowed = false;
        attempt.error ??= AccountsErrors.loginForbidden();
      }
    }
    if (!attempt.allowed) {
      await this.runHooks(this.loginFailureHooks, attempt, 'onLoginFailure');
      throw attempt.error;
    }
    const reply = { ...(await this.loginUser(invocation, result.userId!, result.stamped)), type: attempt.type };
    await this.runHooks(this.loginHooks, attempt, 'onLogin');
    return reply;
  }

  private async loginUser(invocation: MethodInvocation, userId: string, stamped?: StampedToken): Promise<Omit<LoginReply, 'type'>> {
    if (!stamped) {
      stamped = stampedToken();
      await this.tokens.insert(userId, stamped);
    }
    await this.sessions.set(invocation.connection, userId, hashLoginToken(stamped.token));
    await invocation.setUserId(userId);
    return { id: userId, token: stamped.token, tokenExpires: this.tokens.expiresAt(stamped.when) };
  }

  /** Meteor's `_loginMethod`: runs `fn` as a login handler would, then attempts the login it returns. */
  private async loginMethod(invocation: MethodInvocation, methodName: string, methodArguments: unknown[], fn: () => Promise<LoginResult>): Promise<LoginReply> {
    await this.ready;
    let result: LoginResult;
    try {
      result = await fn();
    } catch (error) {
      result = { type: 'password', error };
    }
    return this.attemptLogin(invocation, methodName, methodArguments, result);
  }

  private async runHooks<T>(hooks: Array<Hook<T>>, value: T, what: string): Promise<void> {
    for (const hook of hooks) {
      try {
        await hook(value);
      } catch (error) {
        this.log.error(`an ${what} hook failed`, { error });
      }
    }
  }

  private registerMethods(): void {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const accounts = this;
    this.server.methods({
      async login(this: MethodInvocation, options: unknown) {
        await accounts.ready;
        check(options, Object);
        // A resume is not counted: resumeHandler runs first, and takes any login with a resume token.
        if (!(options as Record<string, unknown>).resume) await accounts.limitAddress(this.connection);
        const result = await runLoginHandlers(accounts.ctx, options as Record<string, unknown>, this.connection.clientAddress);
        return accounts.attemptLogin(this, 'login', [options], result);
      },

      async logout(this: MethodInvocation) {
        const hashedToken = accounts.sessions.hashedTokenOf(this.connection.id);
        const userId = this.userId;
        accounts.sessions.clear(this.connection.id);
        if (hashedToken && userId) await accounts.tokens.destroy(userId, hashedToken);
        const user = userId ? await accounts.users.findOneAsync({ _id: userId }) : undefined;
        await accounts.runHooks(accounts.logoutHooks, { user, connection: this.connection }, 'onLogout');
        await this.setUserId(null);
      },

      async getNewToken(this: MethodInvocation) {
        const userId = this.userId;
        const user = userId ? await accounts.users.findOneAsync({ _id: userId }, { fields: { 'services.resume.loginTokens': 1 } }) : undefined;
        if (!userId || !user) throw notLoggedIn();
        const current = accounts.sessions.hashedTokenOf(this.connection.id);
        const stamped = user.services?.resume?.loginTokens?.find((t) => t.hashedToken === current);
        if (!stamped) throw invalidLoginToken();
        // The new token keeps the old one's time, so logoutOtherClients does not extend the login.
        const fresh = { token: stampedToken().token, when: new Date(stamped.when) };
        await accounts.tokens.insert(userId, fresh);
        return accounts.loginUser(this, userId, fresh);
      },

      async removeOtherTokens(this: MethodInvocation) {
        if (!this.userId) throw notLoggedIn();
        await accounts.tokens.destroyOthers(this.userId, accounts.sessions.hashedTokenOf(this.connection.id));
      },

      async createUser(this: MethodInvocation, options: unknown) {
        await accounts.limitAddress(this.connection);
        return accounts.loginMethod(this, 'createUser', [options], async () => {
          check(options, Object);
          if (accounts.options.forbidClientAccountCreation) return { type: 'password', error: AccountsErrors.signupsForbidden() };
          checkProfile((options as CreateUserOptions).profile, accounts.maxProfileBytes);
          return { type: 'password', userId: await accounts.createUserVerifyingEmail(options as CreateUserOptions, this.connection.clientAddress) };
        });
      },

      async changePassword(this: MethodInvocation, oldPassword: unknown, newPassword: unknown) {
        check(oldPassword, accounts.passwordPattern);
        check(newPassword, accounts.passwordPattern);
        if (!this.userId) throw AccountsErrors.mustBeLoggedIn();
        const user = await accounts.users.findOneAsync({ _id: this.userId });
        if (!user) throw credentialsError(accounts.ctx.ambiguous, AccountsErrors.userNotFound);
        if (!hasPassword(user.services?.password)) throw credentialsError(accounts.ctx.ambiguous, AccountsErrors.noPasswordSet);
        if (!(await passwordMatches(accounts.ctx, user, oldPassword as PasswordInput, this.connection.clientAddress))) throw credentialsError(accounts.ctx.ambiguous, AccountsErrors.incorrectPassword);
        const current = accounts.sessions.hashedTokenOf(this.connection.id);
        const { set, unset } = await accounts.ctx.hasher.fields(newPassword as PasswordInput, this.connection.clientAddress);
        await accounts.users.updateAsync(
          { _id: this.userId },
          { $set: set, $pull: { 'services.resume.loginTokens': { hashedToken: { $ne: current } } }, $unset: { ...unset, 'services.password.reset': 1 } },
        );
        return { passwordChanged: true };
      },

      async forgotPassword(this: MethodInvocation, options: unknown) {
        await accounts.limitAddress(this.connection);
        check(options, { email: Identifier });
        const { email } = options as { email: string };
        // Counted whether or not a user has the address, so a refusal does not tell which accounts exist. Keyed by
        // its case folded as a MongoDB-wire store's case-insensitive lookup folds it: there 'kiſſ' (long s) finds
        // kiss@..., which toLowerCase() keeps apart, so each spelling was 3 more mails to the same victim.
        await accounts.resetMailLimit?.hit(email.toUpperCase().toLowerCase());
        const user = await accounts.findUserByEmail(email);
        if (!user) throw credentialsError(accounts.ctx.ambiguous, AccountsErrors.userNotFound);
        const address = (user.emails ?? []).map((e) => e.address).find((a) => a.toLowerCase() === email.toLowerCase());
        await accounts.sendResetPasswordEmail(user._id, address);
      },

      async resetPassword(this: MethodInvocation, token: unknown, newPassword: unknown) {
        const { connection } = this;
        await accounts.limitAddress(connection);
        return accounts.loginMethod(this, 'resetPassword', [token, newPassword], async () => {
          check(token, String);
          check(newPassword, accounts.passwordPattern);
          const hashed = hashEmailToken(token as string);
          let reason: 'reset' | 'enroll' = 'reset';
          let user = await accounts.users.findOneAsync({ 'services.password.reset.token': hashed });
          if (!user) {
            reason = 'enroll';
            user = await accounts.users.findOneAsync({ 'services.password.enroll.token': hashed });
          }
          const record = user?.services?.password?.[reason];
          if (!user || !record) throw AccountsErrors.tokenExpired();
          if (Date.now() - new Date(record.when).getTime() > accounts.emailTokens.lifetimeMs(reason)) throw AccountsErrors.tokenExpired();
          const email = record.email!;
          if (!(user.emails ?? []).some((e) => e.address === email)) return { type: 'password', userId: user._id, error: AccountsErrors.tokenInvalidEmail() };
          // Changing the password logs out every session of the user, this connection's included.
          accounts.sessions.clear(connection.id);
          const { set, unset } = await accounts.ctx.hasher.fields(newPassword as PasswordInput, connection.clientAddress);
          const affected = await accounts.users.updateAsync(
            { _id: user._id, 'emails.address': email, [`services.password.${reason}.token`]: hashed },
            { $set: { ...set, 'emails.$.verified': true, 'services.resume.loginTokens': [] }, $unset: { ...unset, [`services.password.${reason}`]: 1 } },
          );
          if (affected !== 1) return { type: 'password', userId: user._id, error: AccountsErrors.invalidEmail() };
          return { type: 'password', userId: user._id };
        });
      },

      verifyEmail(this: MethodInvocation, token: unknown) {
        return accounts.loginMethod(this, 'verifyEmail', [token], async () => {
          check(token, String);
          const hashed = hashEmailToken(token as string);
          const user = await accounts.users.findOneAsync({ 'services.email.verificationTokens.token': hashed });
          if (!user) throw AccountsErrors.verifyLinkExpired();
          const record = user.services?.email?.verificationTokens?.find((t) => t.token === hashed);
          if (!record) return { type: 'password', userId: user._id, error: AccountsErrors.verifyLinkExpired() };
          if (!(user.emails ?? []).some((e) => e.address === record.address)) {
            return { type: 'password', userId: user._id, error: AccountsErrors.verifyUnknownAddress() };
          }
          await accounts.users.updateAsync(
            { _id: user._id, 'emails.address': record.address },
            { $set: { 'emails.$.verified': true }, $pull: { 'services.email.verificationTokens': { address: record.address } } },
          );
          return { type: 'password', userId: user._id };
        });
      },
    });
  }

  private registerPublication(): void {
    // Only inclusions add fields: Meteor's usual selector excludes (`{services: 0}`, fields left out of the user
    // its server code reads), and merged with these inclusions it made a projection no query accepts.
    const extra = Object.entries(this.options.defaultFieldSelector ?? {}).filter(([, include]) => include);
    const fields = { profile: 1, username: 1, emails: 1, ...Object.fromEntries(extra) } as Record<string, 0 | 1>;
    const users = this.users;
    this.server.publish(null, function (this: Subscription) {
      return this.userId ? users.find({ _id: this.userId }, { fields }) : null;
    });
  }
}
