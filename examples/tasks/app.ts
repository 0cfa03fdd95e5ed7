/**
 * The tasks app of Meteor's public benchmark (meteor/performance), on Perseid:
 * one collection, four methods, one publication, and a page at / that shows
 * the tasks live. Accounts are on: a logged-in user's tasks also carry who
 * added them; anonymous clients (the benchmark's) work exactly as before.
 */
import { fileURLToPath } from 'node:url';
import { Collection, DDPError, type PerseidServer } from 'perseid';
import { accounts } from 'perseid/accounts';

export interface Task {
  _id: string;
  sessionId: string;
  description: string;
  createdAt: Date;
  /** Set only when a logged-in user added the task. */
  userId?: string;
  username?: string;
}

export const Tasks = new Collection<Task>('taskCollection');

/** Meteor apps use `check()` for this; a bad argument is the client's error (400), not a crash. */
function stringArg(args: unknown, name: string): string {
  const value = (args as Record<string, unknown> | null | undefined)?.[name];
  if (typeof value !== 'string' || value.length === 0 || value.length > 1000) {
    throw new DDPError(400, `Match failed: ${name} must be a non-empty string of at most 1000 characters`);
  }
  return value;
}

export default async function tasksApp(server: PerseidServer): Promise<void> {
  server.serveStatic(fileURLToPath(new URL('./public/', import.meta.url)));
  await Tasks.createIndexAsync({ sessionId: 1 });
  const users = accounts(server);
  await users.ready;

  server.methods({
    async insertTask(args: unknown) {
      const task: Omit<Task, '_id'> = {
        description: stringArg(args, 'description'),
        sessionId: stringArg(args, 'sessionId'),
        createdAt: new Date(),
      };
      if (this.userId) {
        const user = await users.users.findOneAsync({ _id: this.userId }, { fields: { username: 1, emails: 1 } });
        Object.assign(task, { userId: this.userId, username: user?.username ?? user?.emails?.[0]?.address ?? 'a user' });
      }
      return Tasks.insertAsync(task);
    },
    removeTask(args: unknown) {
      return Tasks.removeAsync({ _id: stringArg(args, 'taskId') });
    },
    removeAllTasks(args: unknown) {
      return Tasks.removeAsync({ sessionId: stringArg(args, 'sessionId') });
    },
    fetchTasks() {
      return Tasks.find().fetchAsync();
    },
  });

  server.publish('fetchTasks', () => Tasks.find());
}
