/**
 * Every error the accounts methods send, with Meteor's codes and reasons
 * (accounts-base, accounts-password), so clients written for Meteor show
 * and handle them unchanged. Those a stranger could use to probe which
 * accounts exist pass through `credentialsError`: with ambiguous messages
 * on (Meteor 3's default) they all read the same.
 */
import { DDPError, defineError, type ErrorFactory } from '../ddp/errors.js';

export const AccountsErrors = {
  ambiguous: defineError('ACCOUNTS_AMBIGUOUS', 403, 'Something went wrong. Please check your credentials.', ['result']),
  userNotFound: defineError('USER_NOT_FOUND', 403, 'User not found', ['result']),
  incorrectPassword: defineError('INCORRECT_PASSWORD', 403, 'Incorrect password', ['result']),
  noPasswordSet: defineError('NO_PASSWORD_SET', 403, 'User has no password set', ['result']),
  usernameExists: defineError('USERNAME_EXISTS', 403, 'Username already exists.', ['result']),
  emailExists: defineError('EMAIL_EXISTS', 403, 'Email already exists.', ['result']),
  loggedOutByServer: defineError('LOGGED_OUT_BY_SERVER', 403, "You've been logged out by the server. Please log in again.", ['result']),
  sessionExpired: defineError('SESSION_EXPIRED', 403, 'Your session has expired. Please log in again.', ['result']),
  unrecognizedLogin: defineError('UNRECOGNIZED_LOGIN_OPTIONS', 400, 'Unrecognized options for login request', ['result']),
  loginForbidden: defineError('LOGIN_FORBIDDEN', 403, 'Login forbidden', ['result']),
  signupsForbidden: defineError('SIGNUPS_FORBIDDEN', 403, 'Signups forbidden', ['result']),
  needUsernameOrEmail: defineError('NEED_USERNAME_OR_EMAIL', 400, 'Need to set a username or email', ['result']),
  userValidationFailed: defineError('USER_VALIDATION_FAILED', 403, 'User validation failed', ['result']),
  profileTooLarge: defineError('PROFILE_TOO_LARGE', 400, 'Profile too large: at most {limit} bytes as JSON', ['result']),
  profileKey: defineError('PROFILE_KEY', 400, 'Profile key {key} may not start with $ or contain a dot', ['result']),
  mustBeLoggedIn: defineError('MUST_BE_LOGGED_IN', 401, 'Must be logged in', ['result']),
  tokenExpired: defineError('TOKEN_EXPIRED', 403, 'Token expired', ['result']),
  tokenInvalidEmail: defineError('TOKEN_INVALID_EMAIL', 403, 'Token has invalid email address', ['result']),
  invalidEmail: defineError('INVALID_EMAIL', 403, 'Invalid email', ['result']),
  verifyLinkExpired: defineError('VERIFY_EMAIL_LINK_EXPIRED', 403, 'Verify email link expired', ['result']),
  verifyUnknownAddress: defineError('VERIFY_EMAIL_UNKNOWN_ADDRESS', 403, 'Verify email link is for unknown address', ['result']),
};

// Meteor raises these two with the message as the error code and no reason.
const NOT_LOGGED_IN = defineError('NOT_LOGGED_IN', 'You are not logged in.', '', ['result']);
const INVALID_LOGIN_TOKEN = defineError('INVALID_LOGIN_TOKEN', 'Invalid login token', '', ['result']);
export const notLoggedIn = (): DDPError => new DDPError(NOT_LOGGED_IN.code);
export const invalidLoginToken = (): DDPError => new DDPError(INVALID_LOGIN_TOKEN.code);

/** Meteor's `_handleError`: the precise error, or with ambiguous messages on, the same one for every credential failure. */
export function credentialsError(ambiguous: boolean, precise: ErrorFactory): DDPError {
  return ambiguous ? AccountsErrors.ambiguous() : precise();
}
