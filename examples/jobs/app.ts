// examples/jobs/app.ts: from a clone of Perseid, npx perseid start dist/examples/jobs/app.js; in an app of your own, save it as app.ts and npx perseid start app.ts
import { Collection, DDPError, type PerseidServer } from 'perseid';

const Reports = new Collection<{ day: string; at: Date }>('reports');
const Emails = new Collection<{ to: string; sentAt: Date }>('emails');

export default function app(server: PerseidServer) {
  // 07:00 in Paris every day: once across every process of the app, whichever clock is ahead.
  server.jobs.schedule('daily-report', '0 7 * * *', async (_data, { scheduledAt }) => {
    await Reports.insertAsync({ day: scheduledAt!.toISOString().slice(0, 10), at: new Date() });
  }, { timezone: 'Europe/Paris' });

  // Every 10 seconds (an interval in ms); a run still going when the next is due makes that one skip.
  server.jobs.schedule('prune', 10_000, () => Emails.removeAsync({ sentAt: { $lt: new Date(Date.now() - 86_400_000) } }));

  // One-off work queued by methods: retried twice with backoff (1 s, then 2 s) if it throws or times out.
  server.jobs.define('send-email', async (data, { signal }) => {
    if (signal.aborted) return; // timed out, or this process lost its lease: another one retries it
    await Emails.insertAsync({ to: (data as { to: string }).to, sentAt: new Date() });
  }, { retries: 2, timeoutMs: 30_000 });

  server.methods({
    signUp(to: unknown) {
      if (typeof to !== 'string') throw new DDPError(400, 'signUp(to: string)');
      return server.jobs.enqueue('send-email', { to }, { priority: 5 });
    },
  });
}
