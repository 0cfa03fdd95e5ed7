/**
 * Password reset, enrollment and e-mail verification, Meteor's way: a random
 * token mailed as a link, valid 3 days (reset), 30 days (enroll) or until
 * used (verification); using it logs the user in. Tokens are stored as their
 * SHA-256 (as login tokens are), so a copy of the database cannot be used to
 * take over accounts; Meteor keeps them in clear, in the same fields.
 */
import type { Collection } from '../collections/collection.js';
import { Random } from '../ddp/random.js';
import type { EmailKind, Mailer } from './mailer.js';
import { hashLoginToken } from './resume-tokens.js';
import type { EmailToken, User } from './users.js';

const DAY_MS = 24 * 60 * 60 * 1000;

export interface EmailTokenSettings {
  /** Read at each mail: by default it names the port the server listens on, known only once it does. */
  siteUrl: () => string;
  /** The app's own links (Meteor's `Accounts.urls`), for those it does not want under `#/`. */
  urls?: Partial<Record<EmailKind, (token: string) => string>>;
  from: string;
  resetDays: number;
  enrollDays: number;
  mailer: Mailer;
}

export const hashEmailToken = hashLoginToken;

const TEMPLATES: Record<EmailKind, { subject: string; text: string }> = {
  resetPassword: { subject: 'How to reset your password', text: 'To reset your password, simply click the link below.' },
  enrollAccount: { subject: 'An account has been created for you', text: 'To start using the service, simply click the link below.' },
  verifyEmail: { subject: 'How to verify email address', text: 'To verify your account email, simply click the link below.' },
};

/** Meteor's URLs: `<site>/#/reset-password/<token>`, `#/enroll-account/`, `#/verify-email/`. */
const PATHS = { resetPassword: 'reset-password', enrollAccount: 'enroll-account', verifyEmail: 'verify-email' } as const;

export class EmailTokens {
  constructor(
    private readonly users: Collection<User>,
    private readonly settings: EmailTokenSettings,
  ) {}

  lifetimeMs(reason: 'reset' | 'enroll'): number {
    return (reason === 'reset' ? this.settings.resetDays : this.settings.enrollDays) * DAY_MS;
  }

  private async send(kind: EmailKind, user: User, to: string, token: string): Promise<string> {
    const url = this.settings.urls?.[kind]?.(token) ?? `${this.settings.siteUrl().replace(/\/$/, '')}/#/${PATHS[kind]}/${token}`;
    const greeting = user.username ? `Hello ${user.username},` : 'Hello,';
    const { subject, text } = TEMPLATES[kind];
    await this.settings.mailer({ to, from: this.settings.from, subject, text: `${greeting}\n\n${text}\n\n${url}\n\nThanks.\n`, kind, url });
    return token;
  }

  /** `email`, which must be the user's; without it the first address (reset), or the first unverified one (verification). */
  private static pickAddress(user: User, email: string | undefined, unverified: boolean): string {
    const addresses = (user.emails ?? []).map((e) => e.address);
    if (email === undefined && unverified) {
      const first = user.emails?.find((e) => !e.verified)?.address;
      if (first === undefined) throw new Error('That user has no unverified email addresses.');
      return first;
    }
    const chosen = email ?? addresses[0];
    if (!chosen || !addresses.includes(chosen)) throw new Error('No such email for user.');
    return chosen;
  }

  /** Mails a password reset (or enrollment) link; returns the token. */
  async sendReset(userId: string, email: string | undefined, reason: 'reset' | 'enroll'): Promise<string> {
    const user = await this.users.findOneAsync({ _id: userId });
    if (!user) throw new Error("Can't find user");
    const address = EmailTokens.pickAddress(user, email, false);
    const token = Random.secret();
    const record: EmailToken = { token: hashEmailToken(token), email: address, when: new Date(), reason };
    await this.users.updateAsync({ _id: userId }, { $set: { [`services.password.${reason}`]: record } });
    return this.send(reason === 'reset' ? 'resetPassword' : 'enrollAccount', user, address, token);
  }

  /** Mails an e-mail verification link (to the first unverified address by default); returns the token. */
  async sendVerification(userId: string, address?: string): Promise<string> {
    const user = await this.users.findOneAsync({ _id: userId });
    if (!user) throw new Error("Can't find user");
    const chosen = EmailTokens.pickAddress(user, address, true);
    const token = Random.secret();
    await this.users.updateAsync(
      { _id: userId },
      { $push: { 'services.email.verificationTokens': { token: hashEmailToken(token), address: chosen, when: new Date() } } },
    );
    return this.send('verifyEmail', user, chosen, token);
  }

  /** Removes reset and enrollment tokens past their lifetime (run with the login-token purge). */
  async expire(now = Date.now()): Promise<void> {
    for (const reason of ['reset', 'enroll'] as const) {
      const field = `services.password.${reason}`;
      await this.users.updateAsync({ [`${field}.when`]: { $lt: new Date(now - this.lifetimeMs(reason)) } }, { $unset: { [field]: 1 } }, { multi: true });
    }
  }
}
