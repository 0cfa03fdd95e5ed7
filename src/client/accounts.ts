/**
 * Logins from the client, as Meteor's accounts-password client makes them:
 * the password leaves as its SHA-256 digest (`{digest, algorithm: 'sha-256'}`;
 * the plain string only where the page has no Web Crypto, i.e. not a secure
 * context), the token is kept in `storage` (localStorage in a page) and sent
 * as `{resume: token}` on every reconnect before anything else, and a token
 * the server no longer knows logs the client out.
 */
import type { DDPClient } from './client.js';
import { Emitter } from './emitter.js';

export interface TokenStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

export type UserSelector = string | { username: string } | { email: string } | { id: string };

export interface AccountsClientEvents {
  login: [userId: string];
  logout: [];
}

interface LoginReply {
  id: string;
  token: string;
  tokenExpires: Date;
}

async function passwordDigest(password: string): Promise<string | { digest: string; algorithm: 'sha-256' }> {
  const subtle = (globalThis as { crypto?: { subtle?: SubtleCrypto } }).crypto?.subtle;
  if (!subtle) return password; // the server digests a plain string itself
  const bytes = new Uint8Array(await subtle.digest('SHA-256', new TextEncoder().encode(password)));
  return { digest: Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join(''), algorithm: 'sha-256' };
}

function userQuery(user: UserSelector): object {
  if (typeof user !== 'string') return user;
  return user.includes('@') ? { email: user } : { username: user };
}

export class AccountsClient extends Emitter<AccountsClientEvents> {
  private currentUserId: string | undefined;
  private readonly tokenKey: string;

  constructor(
    private readonly client: DDPClient,
    private readonly storage?: TokenStorage,
    keyPrefix = 'perseid',
  ) {
    super();
    this.tokenKey = `${keyPrefix}.loginToken`;
    client.onReconnect(() => void this.resume());
    // A token from an earlier visit: resume with it (queued first if not connected yet).
    void this.resume();
  }

  /** The logged-in user's id; undefined when logged out (or while a resume is in flight). */
  get userId(): string | undefined {
    return this.currentUserId;
  }

  async loginWithPassword(user: UserSelector, password: string): Promise<string> {
    return this.login('login', [{ user: userQuery(user), password: await passwordDigest(password) }]);
  }

  /** Creates an account and logs in as it (unless the server forbids client sign-ups). */
  async createUser(options: { username?: string; email?: string; password: string; profile?: object }): Promise<string> {
    return this.login('createUser', [{ ...options, password: await passwordDigest(options.password) }]);
  }

  async logout(): Promise<void> {
    try {
      await this.client.call('logout');
    } finally {
      this.loggedOut();
    }
  }

  /** Logs out every other client of this user (Meteor's logoutOtherClients). */
  async logoutOtherClients(): Promise<void> {
    const reply = await this.client.call<LoginReply>('getNewToken');
    this.storeToken(reply.token);
    await this.client.call('removeOtherTokens');
  }

  private async login(method: string, params: unknown[]): Promise<string> {
    const reply = await this.client.apply<LoginReply>(method, params);
    this.storeToken(reply.token);
    this.loggedIn(reply.id);
    return reply.id;
  }

  private resume(): Promise<void> | undefined {
    const token = this.storage?.getItem(this.tokenKey);
    if (!token) return undefined;
    return this.client.apply<LoginReply>('login', [{ resume: token }]).then(
      (reply) => this.loggedIn(reply.id),
      (error: { error?: unknown }) => {
        // Refused (logged out elsewhere, expired): forget the token. A lost connection retries on reconnect.
        if (typeof error.error === 'number') this.loggedOut();
      },
    );
  }

  private storeToken(token: string): void {
    this.storage?.setItem(this.tokenKey, token);
  }

  private loggedIn(userId: string): void {
    if (this.currentUserId === userId) return;
    this.currentUserId = userId;
    this.emit('login', userId);
  }

  private loggedOut(): void {
    this.storage?.removeItem(this.tokenKey);
    if (this.currentUserId === undefined) return;
    this.currentUserId = undefined;
    this.emit('logout');
  }
}
