/**
 * perseid/accounts: logins that Meteor's clients make unchanged.
 *
 *   import { accounts } from 'perseid/accounts';
 *   export default function app(server) { const users = accounts(server, { forbidClientAccountCreation: false }); }
 */
import type { PerseidServer } from '../server/app.js';
import { Accounts, type AccountsOptions } from './accounts.js';

const installed = new WeakMap<PerseidServer, Accounts>();

/** Turns accounts on for `server` (once; a second call returns the same Accounts). */
export function accounts(server: PerseidServer, options: AccountsOptions = {}): Accounts {
  let existing = installed.get(server);
  if (!existing) {
    existing = new Accounts(server, options);
    installed.set(server, existing);
  }
  return existing;
}

export { Accounts, type AccountsOptions, type LoginAttempt, type CreateUserOptions, type LoginReply } from './accounts.js';
export { AccountsErrors } from './errors.js';
export type { User, UserEmail, LoginToken } from './users.js';
export type { Mailer, AccountsEmail } from './mailer.js';
export { hashPassword, checkPassword, sha256Hex, type PasswordInput } from './password.js';
export { hashLoginToken } from './resume-tokens.js';
