// The server of a to-do list: tasks with a done mark, shared live by every page.
import { fileURLToPath } from 'node:url';
import { Collection, DDPError } from 'perseid';

export const Tasks = new Collection('tasks');

function taskId(id) {
  if (typeof id !== 'string' || id === '') throw new DDPError(400, 'A task id is a non-empty string');
  return id;
}

export default async function app(server) {
  server.serveStatic(fileURLToPath(new URL('./public/', import.meta.url)));
  await Tasks.createIndexAsync({ createdAt: -1 });

  server.methods({
    async addTask(text) {
      if (typeof text !== 'string' || text.trim() === '' || text.length > 200) throw new DDPError(400, 'A task is 1 to 200 characters');
      return Tasks.insertAsync({ text: text.trim(), done: false, createdAt: new Date() });
    },
    async setDone(id, done) {
      if (typeof done !== 'boolean') throw new DDPError(400, 'done is true or false');
      return Tasks.updateAsync({ _id: taskId(id) }, { $set: { done } });
    },
    async removeTask(id) {
      return Tasks.removeAsync({ _id: taskId(id) });
    },
  });

  server.publish('tasks', () => Tasks.find({}, { sort: { createdAt: -1 }, limit: 100 }));
}
