/**
 * S2 tasks-nonreactive: S1 without the subscription; after each insert or
 * remove the user calls `fetchTasks()` and checks its own task is (or is no
 * longer) in the result.
 */
import type { Scenario, ScenarioDefaults } from '../scenario.js';

export const options: ScenarioDefaults = {
  description: 'tasks-nonreactive: insert and remove 20 own tasks, fetching all tasks after each (BENCHMARKS.md S2)',
  client: 'lean',
  phases: [{ duration: 60, arrivalRate: 4 }],
  params: { tasks: '20' },
};

const s2: Scenario = async (client, ctx) => {
  const sessionId = `vu${ctx.vu}-${Date.now().toString(36)}`;
  const tasks = Number(ctx.params.tasks ?? 20);
  const fetchHas = async (id: string, present: boolean) => {
    const all = await client.call<Array<{ _id: string }>>('fetchTasks');
    if (all.some((t) => t._id === id) !== present) throw new Error(`fetchTasks ${present ? 'lacks' : 'still has'} task ${id}`);
  };
  await ctx.measure('removeAllTasks', () => client.call('removeAllTasks', { sessionId }));
  const ids: string[] = [];
  for (let i = 0; i < tasks; i++) {
    await ctx.think();
    const id = await ctx.measure('insertTask', async () => {
      const taskId = await client.call<string>('insertTask', { description: `task ${i} of ${sessionId}`, sessionId });
      await fetchHas(taskId, true);
      return taskId;
    });
    ids.push(id);
  }
  for (const taskId of ids) {
    await ctx.think();
    await ctx.measure('removeTask', async () => {
      await client.call('removeTask', { taskId });
      await fetchHas(taskId, false);
    });
  }
  await ctx.measure('removeAllTasks', () => client.call('removeAllTasks', { sessionId }));
};

export default s2;
