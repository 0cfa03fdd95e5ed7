// server.ts — the server's side of contract.ts: each handler gets validated, typed parameters.
import { Collection, implement, type PerseidServer } from 'perseid';
import { addTask, setDone, tasksPublication, type Task } from './contract.js';

const Tasks = new Collection<Task>('tasks');

export function setup(server: PerseidServer): void {
  server.methods({
    [addTask.name]: implement(addTask, (text) => Tasks.insertAsync({ text, done: false, createdAt: new Date() })),
    [setDone.name]: implement(setDone, async (id, done) => {
      await Tasks.updateAsync(id, { $set: { done } });
    }),
  });
  server.publish(tasksPublication.name, implement(tasksPublication, (limit) => Tasks.find({}, { sort: { createdAt: -1 }, limit })));
}
