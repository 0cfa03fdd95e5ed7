/**
 * Resume tokens (Meteor's login tokens): 43 random characters given to the
 * client once, stored only as the base64 SHA-256 with the time it was made,
 * valid for the configured lifetime (90 days by default), and purged from
 * every user on a timer that does not keep the process alive.
 */
import { createHash } from 'node:crypto';
import type { Collection } from '../collections/collection.js';
import { Random } from '../ddp/random.js';
import type { Logger } from '../log.js';
import type { User } from './users.js';

export const DEFAULT_LOGIN_EXPIRATION_DAYS = 90;
/** Meteor's "never" (`loginExpirationInDays: null`): 100 years. */
export const UNEXPIRING_DAYS = 365 * 100;
export const EXPIRE_TOKENS_INTERVAL_MS = 10 * 60 * 1000;
/** Tokens one user keeps at most (about 1 MB of user document); a login beyond it ends the oldest. */
export const DEFAULT_MAX_LOGIN_TOKENS = 10_000;
const DAY_MS = 24 * 60 * 60 * 1000;

export interface StampedToken {
  token: string;
  when: Date;
}

export function hashLoginToken(token: string): string {
  return createHash('sha256').update(token).digest('base64');
}

export function stampedToken(): StampedToken {
  return { token: Random.secret(), when: new Date() };
}

/** Meteor's `loginExpiration` (ms) wins over `loginExpirationInDays`; null days means never. */
export function tokenLifetimeMs(options: { loginExpiration?: number; loginExpirationInDays?: number | null }): number {
  if (options.loginExpiration) return options.loginExpiration;
  if (options.loginExpirationInDays === null) return UNEXPIRING_DAYS * DAY_MS;
  return (options.loginExpirationInDays || DEFAULT_LOGIN_EXPIRATION_DAYS) * DAY_MS;
}

export class ResumeTokens {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly users: Collection<User>,
    readonly lifetimeMs: number,
    private readonly log: Logger,
    private readonly maxPerUser = DEFAULT_MAX_LOGIN_TOKENS,
  ) {}

  expiresAt(when: Date | number): Date {
    return new Date(new Date(when).getTime() + this.lifetimeMs);
  }

  /**
   * Adds a token, first removing the oldest when the user holds `maxPerUser`: without a bound, one account's
   * logins or getNewToken calls grow its document (and the embedded store's memory) for as long as they go on.
   * `$pop` rather than `$push` with `$slice`, which FerretDB ignores; tokens are appended, so the first is the oldest.
   */
  async insert(userId: string, stamped: StampedToken): Promise<void> {
    await this.users.updateAsync(
      { _id: userId, [`services.resume.loginTokens.${this.maxPerUser - 1}`]: { $exists: true } },
      { $pop: { 'services.resume.loginTokens': -1 } },
    );
    await this.users.updateAsync(
      { _id: userId },
      { $addToSet: { 'services.resume.loginTokens': { hashedToken: hashLoginToken(stamped.token), when: stamped.when } } },
    );
  }

  /** Removes one token (legacy unhashed tokens were replaced by their hash when used to log in). */
  async destroy(userId: string, hashedToken: string): Promise<void> {
    await this.users.updateAsync({ _id: userId }, { $pull: { 'services.resume.loginTokens': { hashedToken } } });
  }

  /** Removes every token of `userId` but `keepHashed` (logoutOtherClients, changePassword). */
  async destroyOthers(userId: string, keepHashed: string | undefined): Promise<void> {
    await this.users.updateAsync({ _id: userId }, { $pull: { 'services.resume.loginTokens': { hashedToken: { $ne: keepHashed } } } });
  }

  async clearAll(userId: string): Promise<void> {
    await this.users.updateAsync({ _id: userId }, { $set: { 'services.resume.loginTokens': [] } });
  }

  /** Removes tokens older than the lifetime from every user (or one); their connections are logged out by the watcher. */
  async expire(now = Date.now(), userId?: string): Promise<number> {
    const oldest = new Date(now - this.lifetimeMs);
    const selector = { ...(userId ? { _id: userId } : {}), 'services.resume.loginTokens.when': { $lt: oldest } };
    return this.users.updateAsync(selector, { $pull: { 'services.resume.loginTokens': { when: { $lt: oldest } } } }, { multi: true });
  }

  /** Purges expired tokens every `intervalMs` (Meteor: 10 minutes), without keeping the process alive. */
  startPurging(intervalMs = EXPIRE_TOKENS_INTERVAL_MS, extra?: () => Promise<unknown>): void {
    this.stopPurging();
    this.timer = setInterval(() => {
      Promise.all([this.expire(), extra?.()]).catch((error: unknown) => this.log.warn('could not purge expired tokens', { error }));
    }, intervalMs);
    this.timer.unref();
  }

  stopPurging(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
