/**
 * perseid/accounts: logins that Meteor's clients make unchanged.
 *
 *   import { accounts } from 'perseid/accounts';
 *   export default function app(server) { const users = accounts(server, { forbidClientAccountCreation: false }); }
 */
import type { PerseidServer } from '../server/app.js';
import { Accounts, type AccountsOptions } from './accounts.js';

const installed = new WeakMap<PerseidServer, { accounts: Accounts; options: AccountsOptions }>();

/**
 * Turns accounts on for `server` (once; a later call without options returns the same Accounts). A later call
 * with other options throws: they could not take effect, and dropping them silently (forbidClientAccountCreation,
 * say) would leave the app running without them.
 */
export function accounts(server: PerseidServer, options: AccountsOptions = {}): Accounts {
  const existing = installed.get(server);
  if (!existing) {
    const created = new Accounts(server, options);
    installed.set(server, { accounts: created, options });
    return created;
  }
  if (options !== existing.options && Object.keys(options).length > 0) {
    throw new Error('accounts(server, options) was already called for this server: give every option at the first call, and call accounts(server) without options to get it again');
  }
  return existing.accounts;
}

export { Accounts, type AccountsOptions, type LoginAttempt, type CreateUserOptions, type LoginReply } from './accounts.js';
export type { RateLimitWindow } from './key-limit.js';
export { AccountsErrors } from './errors.js';
export type { User, UserEmail, LoginToken } from './users.js';
export type { Mailer, AccountsEmail } from './mailer.js';
export { hashPassword, checkPassword, sha256Hex, type PasswordInput } from './password.js';
export { hashLoginToken } from './resume-tokens.js';
