/**
 * Logins from the client, as Meteor's accounts-password client makes them:
 * the password leaves as its SHA-256 digest (`{digest, algorithm: 'sha-256'}`;
 * the plain string only where the page has no Web Crypto, i.e. not a secure
 * context), the token is kept in `storage` (localStorage in a page, anything
 * with the same three methods in Node, the client's memory without one) with
 * its expiry, and sent as `{resume: token}` first thing on every new session,
 * so a reload or a reconnect stays logged in. Login calls are `wait` calls,
 * as in Meteor: the page never shows the subscriptions half re-run for the new
 * user. A token the server no longer knows logs the client out, and so does
 * a new session with no token in the storage (another tab logged out).
 */
import type { DDPClient } from './client.js';
import { Emitter } from './emitter.js';
import { reportTo, type MethodCallback } from './meteor-callbacks.js';

export interface TokenStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

export type UserSelector = string | { username: string } | { email: string } | { id: string };

/** The logged-in user's document as the server publishes it (Meteor's default fields). */
export interface ClientUser {
  _id: string;
  username?: string;
  emails?: Array<{ address: string; verified: boolean }>;
  profile?: Record<string, unknown>;
  [field: string]: unknown;
}

export interface AccountsClientEvents {
  login: [userId: string];
  logout: [];
}

interface LoginReply {
  id: string;
  token: string;
  tokenExpires?: Date;
}

async function passwordDigest(password: string): Promise<string | { digest: string; algorithm: 'sha-256' }> {
  const subtle = (globalThis as { crypto?: { subtle?: SubtleCrypto } }).crypto?.subtle;
  if (!subtle) return password; // the server digests a plain string itself
  const bytes = new Uint8Array(await subtle.digest('SHA-256', new TextEncoder().encode(password)));
  return { digest: Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join(''), algorithm: 'sha-256' };
}

/**
 * The token's home when the caller gives no storage (Node): this client's
 * memory, so that a reconnect to a new session still logs in again, as
 * Meteor's client does without localStorage.
 */
function memoryStorage(): TokenStorage {
  const items = new Map<string, string>();
  return {
    getItem: (key) => items.get(key) ?? null,
    setItem: (key, value) => void items.set(key, value),
    removeItem: (key) => void items.delete(key),
  };
}

function userQuery(user: UserSelector): object {
  if (typeof user !== 'string') return user;
  return user.includes('@') ? { email: user } : { username: user };
}

export class AccountsClient extends Emitter<AccountsClientEvents> {
  private readonly tokenKey: string;
  private readonly expiresKey: string;
  /** Login calls in flight (a stored token's included). */
  private loggingInCalls = 0;

  constructor(
    private readonly client: DDPClient,
    private readonly storage: TokenStorage = memoryStorage(),
    keyPrefix = 'perseid',
  ) {
    super();
    this.tokenKey = `${keyPrefix}.loginToken`;
    this.expiresKey = `${keyPrefix}.loginTokenExpires`;
    client.onReconnect(() => void this.resume());
    // A token from an earlier visit: resume with it (queued first if not connected yet).
    void this.resume();
  }

  /** The logged-in user's id; null when logged out (or while a resume is in flight). */
  userId(): string | null {
    return this.client.userId();
  }

  /** The logged-in user's document, once the server has published it. */
  user(): ClientUser | undefined {
    const id = this.client.userId();
    return id === null ? undefined : this.client.collection<ClientUser>('users').findOne(id);
  }

  /** True while a login is in flight: a stored token being tried, a password login, a sign-up (Meteor's loggingIn). */
  loggingIn(): boolean {
    return this.loggingInCalls > 0;
  }

  // Each may take Meteor's callback last, called with the error (undefined on success) as well.
  loginWithPassword(user: UserSelector, password: string, callback?: MethodCallback): Promise<string> {
    return reportTo(this.login('login', async () => [{ user: userQuery(user), password: await passwordDigest(password) }]), callback);
  }

  /** Creates an account and logs in as it (unless the server forbids client sign-ups). */
  createUser(options: { username?: string; email?: string; password: string; profile?: object }, callback?: MethodCallback): Promise<string> {
    return reportTo(this.login('createUser', async () => [{ ...options, password: await passwordDigest(options.password) }]), callback);
  }

  /** Asks the server to mail a password reset link to `email` (Meteor's forgotPassword). */
  forgotPassword(options: { email: string }, callback?: MethodCallback): Promise<void> {
    return reportTo(this.client.call('forgotPassword', options), callback);
  }

  /**
   * Sets a new password with the token of a reset or enrollment e-mail's link, and logs in with the token it gets
   * (the server ends every other login of the user).
   */
  resetPassword(token: string, newPassword: string, callback?: MethodCallback): Promise<string> {
    return reportTo(this.login('resetPassword', async () => [token, await passwordDigest(newPassword)]), callback);
  }

  /** Marks the address a verification e-mail's link was for as verified, and logs in. */
  verifyEmail(token: string, callback?: MethodCallback): Promise<string> {
    return reportTo(this.login('verifyEmail', () => [token]), callback);
  }

  /** Changes the logged-in user's password; their other logins end, this one stays. */
  changePassword(oldPassword: string, newPassword: string, callback?: MethodCallback): Promise<void> {
    const changing = async () => {
      await this.client.call('changePassword', await passwordDigest(oldPassword), await passwordDigest(newPassword));
    };
    return reportTo(changing(), callback);
  }

  logout(callback?: MethodCallback): Promise<void> {
    const loggingOut = async () => {
      try {
        await this.client.apply('logout', [], { wait: true });
      } finally {
        this.loggedOut();
      }
    };
    return reportTo(loggingOut(), callback);
  }

  /** Logs out every other client of this user (Meteor's logoutOtherClients). */
  logoutOtherClients(callback?: MethodCallback): Promise<void> {
    const removing = async () => {
      this.storeToken(await this.client.apply<LoginReply>('getNewToken', [], { wait: true }));
      await this.client.call('removeOtherTokens');
    };
    return reportTo(removing(), callback);
  }

  /** `params` is a function: loggingIn() is true from the call on, while the password is digested too. */
  private async login(method: string, params: () => unknown[] | Promise<unknown[]>): Promise<string> {
    this.loggingInCalls++;
    try {
      const reply = await this.client.apply<LoginReply>(method, await params(), { wait: true });
      this.storeToken(reply);
      this.loggedIn(reply.id);
      return reply.id;
    } finally {
      this.loggingInCalls--;
    }
  }

  private resume(): Promise<void> | undefined {
    const token = this.storage.getItem(this.tokenKey);
    // A new session without a token is logged out: another tab sharing the storage logged out (its
    // logout closed this connection), and the page must not go on showing the user.
    if (!token) {
      this.loggedOut();
      return undefined;
    }
    const expires = Number(this.storage.getItem(this.expiresKey));
    if (expires && expires <= Date.now()) {
      this.loggedOut();
      return undefined;
    }
    this.loggingInCalls++;
    return this.client.apply<LoginReply>('login', [{ resume: token }], { wait: true }).then(
      (reply) => {
        this.loggingInCalls--;
        this.loggedIn(reply.id);
      },
      (error: { error?: unknown }) => {
        this.loggingInCalls--;
        // Refused (logged out elsewhere, expired): forget the token. A lost connection retries on reconnect.
        if (typeof error.error === 'number') this.loggedOut();
      },
    );
  }

  private storeToken(reply: LoginReply): void {
    this.storage.setItem(this.tokenKey, reply.token);
    if (reply.tokenExpires instanceof Date) this.storage.setItem(this.expiresKey, String(reply.tokenExpires.getTime()));
    else this.storage.removeItem(this.expiresKey);
  }

  private loggedIn(userId: string): void {
    if (this.client.userId() === userId) return;
    this.client.setUserId(userId);
    this.emit('login', userId);
  }

  private loggedOut(): void {
    this.storage.removeItem(this.tokenKey);
    this.storage.removeItem(this.expiresKey);
    if (this.client.userId() === null) return;
    this.client.setUserId(null);
    this.emit('logout');
  }
}
