// A load scenario of your own: each simulated user runs this once.
// scenario.ts; run it with: npx perseid load scenario.ts --url http://127.0.0.1:3000 --rate 5 --duration 30
import type { LoadClient, ScenarioContext } from 'perseid/load';

export const options = { description: 'add notes and watch them arrive', client: 'full' as const };

export default async function addNotes(client: LoadClient, ctx: ScenarioContext): Promise<void> {
  await ctx.measure('subscribe', () => client.subscribe('latestNotes'));
  for (let i = 0; i < 3 && ctx.running; i++) {
    await ctx.measure('addNote', () => client.call('addNote', `user ${ctx.vu} note ${i}`));
    await ctx.think();
  }
}
