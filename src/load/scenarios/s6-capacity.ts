/**
 * S6 capacity: users connect and subscribe (a connection storm when they all
 * arrive within a second), then stay idle for `hold` seconds, answering
 * heartbeats. With server sampling, the report gives memory per connection.
 */
import type { Scenario, ScenarioDefaults } from '../scenario.js';

export const options: ScenarioDefaults = {
  description: 'capacity: connect and subscribe, then hold the connection idle (BENCHMARKS.md S6); storm: --rate C --duration 1',
  client: 'lean',
  phases: [{ duration: 1, arrivalRate: 1000 }],
  params: { hold: '20', publication: 'fetchTasks' },
};

const s6: Scenario = async (client, ctx) => {
  await ctx.measure('subscribe', () => client.subscribe(ctx.params.publication ?? 'fetchTasks'));
  ctx.count('connections held');
  await ctx.sleep(Number(ctx.params.hold ?? 20) * 1000);
};

export default s6;
