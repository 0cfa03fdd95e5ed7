// notes.ts — accounts, a per-user publication, argument checks and a rate limit
import { Collection, DDPError, check, rateLimiter, type PerseidServer } from 'perseid';
import { accounts } from 'perseid/accounts';

const Notes = new Collection<{ owner: string; text: string }>('notes');

export function setup(server: PerseidServer) {
  const users = accounts(server); // login, createUser, logout, ... as Meteor's clients call them
  users.validateNewUser((user) => (user.username ?? '').length >= 3);

  server.methods({
    async addNote(text: unknown) {
      check(text, String); // a mismatch reaches the client as 400 "Match failed"
      if (!this.userId) throw new DDPError(401, 'Log in first');
      return Notes.insertAsync({ owner: this.userId, text });
    },
  });
  server.publish('myNotes', function () {
    return this.userId ? Notes.find({ owner: this.userId }) : null; // re-runs on login and logout
  });
  // Meteor's DDPRateLimiter rules: at most 5 notes per second per user.
  rateLimiter(server).addRule({ type: 'method', name: 'addNote', userId: () => true }, 5, 1000);
}
