/**
 * S3 pub-cycle (Cluster's benchmark): subscribe to a publication of about
 * 20 KB or 200 KB of documents, wait for `ready`, disconnect, again. Run at a
 * fixed concurrency; subscriptions per minute = `subscribe` count / minutes.
 * The server needs a publication `items(size)` (bench/apps/pub-cycle.ts).
 */
import type { Scenario, ScenarioDefaults } from '../scenario.js';

export const options: ScenarioDefaults = {
  description: 'pub-cycle: connect, subscribe to ~20 KB or ~200 KB of documents, wait for ready, disconnect, repeat (BENCHMARKS.md S3)',
  client: 'lean',
  concurrency: 10,
  duration: 60,
  params: { size: '200kb' },
};

const s3: Scenario = async (client, ctx) => {
  const size = ctx.params.size ?? '200kb';
  if (size !== '20kb' && size !== '200kb') throw new Error('--param size must be 20kb or 200kb');
  await ctx.measure('subscribe', () => client.subscribe('items', size));
};

export default s3;
