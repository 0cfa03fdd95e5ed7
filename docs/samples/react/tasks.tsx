// tasks.tsx — a React component on perseid/react: subscribe, query, call; it re-renders as data changes.
import { DDPProvider, useFind, useMethod, useStatus, useSubscribe } from 'perseid/react';
import type { DDPClient } from 'perseid/client';
import { addTask, setDone, tasksPublication, type Task } from '../client/contract.js';

export function TaskList({ client }: { client: DDPClient }) {
  const isLoading = useSubscribe(tasksPublication, 100);
  const tasks = useFind(() => client.collection<Task>('tasks').cursor({}, { sort: { createdAt: -1 } }), [client]);
  const add = useMethod(addTask);
  const done = useMethod(setDone);
  const status = useStatus();
  if (isLoading()) return <p>Loading… ({status})</p>;
  return (
    <section>
      <button disabled={add.pending} onClick={() => void add.call('another task')}>
        Add
      </button>
      {add.error && <p role="alert">{add.error.message}</p>}
      <ul>
        {tasks.map((task) => (
          <li key={task._id} className={task.done ? 'done' : ''} onClick={() => void done.call(task._id, !task.done)}>
            {task.text}
          </li>
        ))}
      </ul>
    </section>
  );
}

export function App({ client }: { client: DDPClient }) {
  return (
    <DDPProvider client={client}>
      <TaskList client={client} />
    </DDPProvider>
  );
}
