// docs/samples/jobs/signal.ts: a job that stops when its attempt times out, by handing its signal to what it waits on
import type { PerseidServer } from 'perseid';

export default function app(server: PerseidServer) {
  // Imports a partner's orders page by page. After 5 s the attempt fails and is retried; its signal is aborted then,
  // and fetch, given it, cancels the request in flight: the job ends instead of running on beside its retry.
  server.jobs.define('import-orders', async (data, { signal }) => {
    const { url } = data as { url: string };
    let rows = 0;
    for (let page = 1; ; page++) {
      const batch = (await (await fetch(`${url}?page=${page}`, { signal })).json()) as unknown[];
      if (batch.length === 0) return { rows };
      rows += batch.length;
    }
  }, { timeoutMs: 5_000, retries: 1 });
}
