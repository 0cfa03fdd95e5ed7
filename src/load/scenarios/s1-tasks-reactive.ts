/**
 * S1 tasks-reactive (Meteor's own 2.16 vs 3.x benchmark, the tasks app): each
 * user subscribes to every task, clears its own, inserts `tasks` tasks waiting
 * each time for its own task to arrive as `added`, removes them waiting for each
 * `removed`, and clears again.
 */
import type { Scenario, ScenarioDefaults } from '../scenario.js';

export const options: ScenarioDefaults = {
  description: 'tasks-reactive: subscribe to all tasks, insert and remove 20 own tasks, each seen arriving (BENCHMARKS.md S1)',
  client: 'lean',
  phases: [{ duration: 60, arrivalRate: 4 }],
  params: { tasks: '20' },
};

const s1: Scenario = async (client, ctx) => {
  const sessionId = `vu${ctx.vu}-${Date.now().toString(36)}`;
  const tasks = Number(ctx.params.tasks ?? 20);
  await ctx.measure('subscribe', () => client.subscribe('fetchTasks'));
  await ctx.think();
  await ctx.measure('removeAllTasks', () => client.call('removeAllTasks', { sessionId }));
  const ids: string[] = [];
  for (let i = 0; i < tasks; i++) {
    await ctx.think();
    const { randomSeed, id } = client.seededInsert('taskCollection');
    ids.push(id);
    await ctx.measure('insertTask', () =>
      client.expect('added', 'taskCollection', id, () => client.apply('insertTask', [{ description: `task ${i} of ${sessionId}`, sessionId }], { randomSeed })),
    );
  }
  for (const taskId of ids) {
    await ctx.think();
    await ctx.measure('removeTask', () => client.expect('removed', 'taskCollection', taskId, () => client.call('removeTask', { taskId })));
  }
  await ctx.think();
  await ctx.measure('removeAllTasks', () => client.call('removeAllTasks', { sessionId }));
};

export default s1;
