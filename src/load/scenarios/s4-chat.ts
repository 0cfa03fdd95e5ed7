/**
 * S4 chat (Smart Collections' benchmark): every user joins one of `groups`
 * groups, subscribes to its messages and sends one every `interval` ms until
 * the run ends. Latency is call → `updated`, by when the message has reached
 * the sender's own subscription. The server runs examples/chat.
 */
import type { Scenario, ScenarioDefaults } from '../scenario.js';

export const options: ScenarioDefaults = {
  description: 'chat: 50 users in 25 groups, each sending a message every 2 s to its group (BENCHMARKS.md S4)',
  client: 'lean',
  concurrency: 50,
  duration: 180,
  params: { groups: '25', interval: '2000' },
};

const s4: Scenario = async (client, ctx) => {
  const group = `group-${ctx.vu % Number(ctx.params.groups ?? 25)}`;
  const interval = Number(ctx.params.interval ?? 2000);
  await ctx.measure('subscribe', () => client.subscribe('messages', group));
  // Users start spread over one interval so their messages do not come in bursts.
  await ctx.sleep(Math.random() * interval);
  for (let n = 0; ctx.running; n++) {
    const started = performance.now();
    await ctx.measure('sendMessage', () => client.call('sendMessage', { group, message: `message ${n} from user ${ctx.vu}` }));
    await ctx.sleep(Math.max(0, started + interval - performance.now()));
  }
};

export default s4;
