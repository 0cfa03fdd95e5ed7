/**
 * Compile-only checks of typed contracts (tsc runs over test/, nothing here
 * runs): a definition gives the server's handler its parameter and result
 * types and the client's call/subscribe the caller's, with zod and valibot.
 * Each `@ts-expect-error` line must stay an error, or tsc fails.
 */
import * as v from 'valibot';
import { z } from 'zod';
import type { DDPClient} from '../../src/client/index.js';
import { defineMethod, definePublication, returns } from '../../src/client/index.js';
import { implement } from '../../src/validation/index.js';

const addTask = defineMethod({
  name: 'addTask',
  params: [z.object({ text: z.string(), done: z.boolean().default(false) })],
  result: returns<string>(),
});
const rename = defineMethod({ name: 'rename', params: [v.string(), v.pipe(v.string(), v.minLength(3))], result: z.number() });
const room = definePublication({ name: 'room', params: [z.string()] });
const page = definePublication({ name: 'page', params: [z.string(), z.number().int().default(50), v.optional(v.boolean())] });

export function server(): void {
  implement(addTask, function ({ text, done }) {
    const flag: boolean = done; // the schema's output: the default applied
    void this.userId;
    return `${text}${String(flag)}`;
  });
  implement(rename, async (id, name) => id.length + name.length);
  // @ts-expect-error the result must be a string
  implement(addTask, () => 42);
  // @ts-expect-error a parameter the definition does not have
  implement(rename, (id: string, name: string, extra: string) => extra.length);
  implement(page, (name, limit, archived) => {
    const sized: number = limit; // the handler gets the default, never undefined
    // @ts-expect-error optional: it may be undefined
    const flag: boolean = archived;
    return [name, sized, flag];
  });
  implement(room, function (name) {
    const named: string = name;
    this.ready();
    return named;
  });
}

export async function client(c: DDPClient): Promise<void> {
  const id: string = await c.call(addTask, { text: 'milk' }); // `done` may be left out: it has a default
  const size: number = await c.apply(rename, ['a', 'bcd']);
  c.subscribe(room, 'lobby');
  c.stub(addTask, function ({ text }) {
    return this.isSimulation && text;
  });
  // @ts-expect-error the result is a string
  const wrong: number = await c.call(addTask, { text: 'milk' });
  // @ts-expect-error `text` is required
  await c.call(addTask, {});
  // @ts-expect-error two parameters
  await c.call(rename, 'a');
  // @ts-expect-error a string, not a number
  c.subscribe(room, 1);
  // Trailing parameters that accept undefined (a default, optional) may be left out; the others may not.
  c.subscribe(page, 'general');
  c.subscribe(page, 'general', 100);
  c.subscribe(page, 'general', undefined, true);
  // @ts-expect-error the room is required
  c.subscribe(page);
  // @ts-expect-error an int, not a string
  c.subscribe(page, 'general', '100');
  // Untyped calls stay as they were.
  const anything = await c.call<{ ok: boolean }>('legacy', 1, 2);
  void [id, size, wrong, anything.ok];
}
