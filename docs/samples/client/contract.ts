// contract.ts — imported by the server and the page alike: each method and publication defined once.
import { defineMethod, definePublication, returns } from 'perseid/client';
import { z } from 'zod';

export interface Task {
  _id: string;
  text: string;
  done: boolean;
  createdAt: Date;
}

export const addTask = defineMethod({ name: 'tasks.add', params: [z.string().trim().min(1).max(200)], result: returns<string>() });
export const setDone = defineMethod({ name: 'tasks.setDone', params: [z.string(), z.boolean()] });
export const tasksPublication = definePublication({ name: 'tasks', params: [z.number().int().min(1).max(500).default(100)] });
