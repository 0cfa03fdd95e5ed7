// page.ts — the client's side: stubs show a change at once, local queries answer Mongo selectors.
import { DDPClient } from 'perseid/client';
import { addTask, setDone, tasksPublication, type Task } from './contract.js';

export async function run(url: string): Promise<{ shownAtOnce: boolean; open: string[]; events: string[] }> {
  const client = new DDPClient(url);
  const tasks = client.collection<Task>('tasks');
  // Stubs: run at once on the local copy; the server's answer then replaces what they wrote.
  client.stub(addTask, (text) => tasks.insert({ text: text.trim(), done: false, createdAt: new Date() }));
  client.stub(setDone, (id, done) => tasks.update(id, { $set: { done } }));
  try {
    await client.subscribe(tasksPublication, 50).ready;
    const events: string[] = [];
    const open = tasks.cursor({ done: false }, { sort: { createdAt: -1 } });
    const watching = open.observeChanges({
      added: (_id, fields) => events.push(`added ${String(fields.text)}`),
      removed: () => events.push('removed'),
    });
    const adding = client.call(addTask, 'write the docs'); // typed: a string in, a Promise<string> out
    const shownAtOnce = tasks.findOne({ text: 'write the docs' }) !== undefined; // before the server answered
    const id = await adding; // the same _id the stub used: the call carried the stub's random seed
    await client.call(addTask, 'test them');
    await client.call(setDone, id, true);
    watching.stop();
    return { shownAtOnce, open: open.fetch().map((task) => task.text), events };
  } finally {
    client.disconnect();
  }
}
