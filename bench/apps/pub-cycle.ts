/**
 * The app of BENCHMARKS.md S3 (pub-cycle): a publication `items(size)` of about
 * 20 KB (20 documents) or 200 KB (200 documents) of 1 KB documents.
 * With PUB_CYCLE_KEEP_LIVE=1 every process keeps both queries live itself (S3's
 * cached variant, also for each worker or server of S5).
 * Run: perseid start dist/bench/apps/pub-cycle.js
 */
import { Collection, DDPError, type PerseidServer } from 'perseid';

export const Items = new Collection('items');
const SIZES: Record<string, number> = { '20kb': 20, '200kb': 200 };

/** One document of about 1 KB, the same every run. */
export function item(size: string, n: number): Record<string, unknown> {
  return { _id: `${size}-${String(n).padStart(4, '0')}`, size, n, title: `Item ${n} of ${size}`, body: `${'lorem ipsum dolor sit amet '.repeat(36)}#${n}` };
}

export default async function pubCycleApp(server: PerseidServer): Promise<void> {
  // Upserts: several processes (workers, servers) may seed the same database at once.
  for (const [size, count] of Object.entries(SIZES)) for (let n = 0; n < count; n++) await Items.upsertAsync({ _id: item(size, n)._id }, item(size, n));
  if (process.env.PUB_CYCLE_KEEP_LIVE === '1') for (const size of Object.keys(SIZES)) await Items.find({ size }).observeChangesAsync({});
  server.publish('items', (size: unknown) => {
    if (typeof size !== 'string' || !(size in SIZES)) throw new DDPError(400, 'size must be 20kb or 200kb');
    return Items.find({ size });
  });
}
