/**
 * Compile-only checks of perseid/react's types (tsc runs over test/, nothing
 * here runs): hooks infer documents from the cursor and parameters and
 * results from contracts. Each `@ts-expect-error` line must stay an error.
 */
import { z } from 'zod';
import { defineMethod, definePublication, returns, type DDPClient } from '../../src/client/index.js';
import { useFind, useFindOne, useMethod, useStatus, useSubscribe, useUser, useUserId } from '../../src/react/index.js';

interface Task {
  _id: string;
  text: string;
}
const addTask = defineMethod({ name: 'addTask', params: [z.string()], result: returns<string>() });
const tasksOf = definePublication({ name: 'tasks', params: [z.string()] });

export function Component(client: DDPClient): string {
  const tasks = client.collection<Task>('tasks');
  const isLoading: () => boolean = useSubscribe(tasksOf, 'me');
  useSubscribe('untyped', 1, { any: 'thing' });
  // @ts-expect-error the publication takes a string
  useSubscribe(tasksOf, 1);
  const list: readonly Task[] = useFind(() => tasks.cursor({}, { sort: { text: 1 } }), []);
  // @ts-expect-error results are read-only
  list.push({ _id: 'x', text: 'y' });
  const one: Task | undefined = useFindOne(() => tasks.cursor('id'), []);
  const add = useMethod(addTask);
  void add.call('text').then((id: string) => id);
  // @ts-expect-error addTask takes a string
  void add.call(1);
  const result: string | undefined = add.result;
  const status: 'idle' | 'connecting' | 'connected' | 'waiting' | 'closed' = useStatus();
  const userId: string | null = useUserId();
  const name = useUser()?.username;
  return [isLoading(), one?.text, result, status, userId, name].join();
}
