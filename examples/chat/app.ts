/**
 * A group chat: the app of BENCHMARKS.md S4 (Smart Collections' benchmark).
 * Each user subscribes to one group's latest messages and sends messages to it.
 */
import { Collection, DDPError, type PerseidServer } from 'perseid';

export interface Message {
  _id: string;
  group: string;
  user: string;
  text: string;
  at: Date;
}

export const Messages = new Collection<Message>('messages');

function text(value: unknown, name: string, max: number): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > max) throw new DDPError(400, `Match failed: ${name} must be a string of 1 to ${max} characters`);
  return value;
}

export default async function chatApp(server: PerseidServer): Promise<void> {
  await Messages.createIndexAsync({ group: 1, at: -1 });

  server.methods({
    sendMessage(args: unknown) {
      const { group, message } = (args ?? {}) as Record<string, unknown>;
      return Messages.insertAsync({ group: text(group, 'group', 100), text: text(message, 'message', 2000), user: this.userId ?? this.connection.id, at: new Date() });
    },
  });

  server.publish('messages', (group: unknown) => Messages.find({ group: text(group, 'group', 100) }, { sort: { at: -1 }, limit: 50 }));
}
