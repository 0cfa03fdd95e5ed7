/**
 * The app of the "many live queries" benchmark (bench/many-queries.ts): every
 * user subscribes to their own inbox, `inbox(user)` = the messages sent to
 * them, and `send({to, text})` puts a message in one inbox. 10,000 users are
 * 10,000 live queries on one collection, each concerned by one write in 10,000.
 * Run: perseid start dist/bench/apps/inbox.js
 */
import { Collection, DDPError, type PerseidServer } from 'perseid';

export const Messages = new Collection('messages');

function user(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 64) throw new DDPError(400, 'user must be a string of 1 to 64 characters');
  return value;
}

export default async function inboxApp(server: PerseidServer): Promise<void> {
  await Messages.createIndexAsync({ to: 1 });
  server.methods({
    send(args: unknown) {
      const { to, text } = (args ?? {}) as Record<string, unknown>;
      if (typeof text !== 'string' || text.length > 1000) throw new DDPError(400, 'text must be a string of at most 1000 characters');
      return Messages.insertAsync({ to: user(to), text, at: new Date() });
    },
  });
  server.publish('inbox', (to: unknown) => Messages.find({ to: user(to) }));
}
