/**
 * Which token each logged-in connection uses, and the watch that logs it out
 * when that token goes: removed by a logout elsewhere, logoutOtherClients, a
 * password change, expiry, or a script editing the database directly. The
 * watch is a live query on the user's document (one per user, shared by all
 * their connections through the live-query registry) that sees the user's
 * token hashes; because it follows the collection's changes, not this
 * process's calls, a token removed through any server of a cluster closes the
 * connections on every server. A closed connection's client reconnects and
 * fails to resume, as Meteor's does.
 */
import type { Collection } from '../collections/collection.js';
import type { Logger } from '../log.js';
import type { ConnectionHandle } from '../server/connection-handle.js';
import type { User } from './users.js';

interface LoginSession {
  userId: string;
  hashedToken: string;
  stop(): void;
}

function hasToken(doc: User | undefined, hashedToken: string): boolean {
  return doc?.services?.resume?.loginTokens?.some((t) => t.hashedToken === hashedToken) ?? false;
}

export class LoginSessions {
  private readonly byConnection = new Map<string, LoginSession>();

  constructor(
    private readonly users: Collection<User>,
    private readonly log: Logger,
  ) {}

  hashedTokenOf(connectionId: string): string | undefined {
    return this.byConnection.get(connectionId)?.hashedToken;
  }

  get size(): number {
    return this.byConnection.size;
  }

  /** Forgets the connection's token (logout, or the connection closed). */
  clear(connectionId: string): void {
    const session = this.byConnection.get(connectionId);
    if (!session) return;
    this.byConnection.delete(connectionId);
    session.stop();
  }

  /**
   * Records that `connection` is logged in as `userId` with `hashedToken`, and
   * closes it as soon as the token is gone from the user's document.
   */
  async set(connection: ConnectionHandle, userId: string, hashedToken: string): Promise<void> {
    this.clear(connection.id);
    // Closed while its login ran (a hash can wait its turn for seconds): its onClose, which clears, has run.
    if (connection.closed) return;
    let active = true;
    let checking = false;
    const session: LoginSession = { userId, hashedToken, stop: () => (active = false) };
    this.byConnection.set(connection.id, session);
    const logout = () => {
      if (!active || this.byConnection.get(connection.id) !== session) return;
      this.log.debug('closing a connection whose login token was removed', { connection: connection.id, userId });
      this.clear(connection.id);
      connection.close();
    };
    // A live query shared by every connection of the user; it may lag behind a write this process just
    // made (a change stream), so the token's absence there is confirmed against the database before closing.
    const confirmGone = () => {
      if (!active || checking) return;
      checking = true;
      this.users
        .findOneAsync({ _id: userId, 'services.resume.loginTokens.hashedToken': hashedToken }, { fields: { _id: 1 } })
        .then((found) => {
          checking = false;
          if (!found) logout();
        })
        .catch((error: unknown) => {
          checking = false;
          this.log.warn('could not check a login token', { userId, error });
        });
    };
    let added = false;
    const seen = (doc: User) => {
      added = true;
      if (!hasToken(doc, hashedToken)) confirmGone();
    };
    const handle = await this.users
      .find({ _id: userId }, { fields: { 'services.resume.loginTokens.hashedToken': 1 } })
      .observeAsync({ added: seen, changed: seen, removed: logout });
    session.stop = () => {
      active = false;
      handle.stop();
    };
    if (!active) handle.stop();
    // The user may be gone before the watch began: no `added` came at all.
    else if (!added) confirmGone();
  }

  stopAll(): void {
    for (const id of [...this.byConnection.keys()]) this.clear(id);
  }
}
