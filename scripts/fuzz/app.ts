/**
 * The app the fuzz program's server runs: an echo, writes to a bounded set of
 * documents (so a million frames do not grow the data), and a publication of
 * them, so valid frames exercise methods, EJSON, the write fence and the merge box.
 */
import { Collection, DDPError, type PerseidServer } from 'perseid';

const Items = new Collection<{ _id: string; n: number; at: Date }>('fuzzItems');

export default function fuzzApp(server: PerseidServer): void {
  server.methods({
    echo: (value: unknown) => value,
    async add(doc: unknown) {
      const key = (doc as { key?: unknown } | null)?.key;
      if (typeof key !== 'number' || !Number.isInteger(key) || key < 0) throw new DDPError(400, 'add({ key: a natural number })');
      await Items.upsertAsync({ _id: `k${key % 16}` }, { $set: { n: key, at: new Date() } });
      return key;
    },
  });
  server.publish('all', () => Items.find({}, { sort: { _id: 1 } }));
}
