/**
 * S1-like load for the chaos suites, and the checks they make after breaking
 * something. Each user subscribes to every item and adds items in a loop with
 * a short think time, through Perseid's own client (it reconnects,
 * resubscribes and re-sends unanswered calls). A write counts as acknowledged
 * when its call returned an id; after the chaos, every acknowledged id must be
 * in the database and every client must hold exactly what the database holds,
 * within 5 s. Each call carries a random seed, so the id a refused call would
 * have inserted is known too.
 */
import assert from 'node:assert/strict';
import { MongoClient } from 'mongodb';
import { DDPClient, DDPError } from '../src/client/node.js';
import { collectionIdSequence, Random, RandomStream } from '../src/ddp/random.js';

/** Reconnect fast: the suites measure convergence, not Meteor's production backoff. */
const BACKOFF = { minCount: 1, minTimeout: 50, baseTimeout: 100, exponent: 1.5, maxTimeout: 500, fuzz: 0.5 };
export const CONVERGE_MS = 5000;

export class ChaosLoad {
  readonly acknowledged = new Set<string>();
  /** The ids of calls the server answered with an error (a 503 while the disk is full, say). */
  readonly refused = new Set<string>();
  /** Failed calls by message (a 503 while a database is away, a connection lost mid-call). */
  readonly failures = new Map<string, number>();
  private running = true;
  private loops: Array<Promise<void>> = [];

  private constructor(readonly clients: DDPClient[]) {}

  /** Opens `users` clients (spread over `urls`), subscribes each to `items`, then starts writing. */
  static async start(urls: readonly string[], users = 8, thinkMs = 25): Promise<ChaosLoad> {
    const clients = urls.length ? Array.from({ length: users }, (_, i) => new DDPClient(urls[i % urls.length]!, { backoff: BACKOFF })) : [];
    const load = new ChaosLoad(clients);
    await Promise.all(clients.map((c) => c.subscribe('items').ready));
    load.loops = clients.map((client, u) => load.write(client, u, thinkMs));
    return load;
  }

  private async write(client: DDPClient, user: number, thinkMs: number): Promise<void> {
    for (let i = 0; this.running; i++) {
      const randomSeed = Random.id(20);
      try {
        this.acknowledged.add(await client.apply<string>('addItem', [i, `user ${user}`], { randomSeed }));
      } catch (error) {
        if (error instanceof DDPError && typeof error.error === 'number') this.refused.add(collectionIdSequence(new RandomStream(randomSeed), 'items').id());
        const kind = (error as Error).message.slice(0, 80);
        this.failures.set(kind, (this.failures.get(kind) ?? 0) + 1);
      }
      await new Promise((r) => setTimeout(r, thinkMs));
    }
  }

  /** Waits until `more` writes beyond those acknowledged so far are acknowledged: the load makes progress. */
  async progress(more: number, what: string, timeoutMs = 15000): Promise<void> {
    const target = this.acknowledged.size + more;
    const deadline = Date.now() + timeoutMs;
    while (this.acknowledged.size < target) {
      if (Date.now() > deadline) {
        const statuses = this.clients.map((c) => c.status).join(' ');
        throw new Error(`${what}: ${this.acknowledged.size} of ${target} writes acknowledged in ${timeoutMs} ms; clients ${statuses}; failures ${JSON.stringify([...this.failures])}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Stops writing and waits for the calls in flight to settle (they are re-sent after a reconnect). */
  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  /**
   * Checks that every acknowledged write is among `stored` (the database's
   * ids), then waits until every client holds exactly `stored`; fails after
   * CONVERGE_MS. Returns how long convergence took.
   */
  async check(stored: ReadonlySet<string>): Promise<number> {
    const lost = [...this.acknowledged].filter((id) => !stored.has(id));
    assert.deepEqual(lost, [], `${lost.length} of ${this.acknowledged.size} acknowledged writes lost`);
    const started = Date.now();
    const behind = (): number[] =>
      this.clients.flatMap((client, i) => {
        const held = client.collection('items').find();
        return held.length === stored.size && held.every((doc) => stored.has(String(doc._id))) ? [] : [i];
      });
    while (behind().length) {
      if (Date.now() - started > CONVERGE_MS) {
        const sizes = behind().map((i) => `client ${i}: ${this.clients[i]!.collection('items').find().length} (${this.clients[i]!.status})`);
        assert.fail(`not converged within ${CONVERGE_MS} ms on ${stored.size} items: ${sizes.join(', ')}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    return Date.now() - started;
  }

  close(): void {
    this.running = false;
    for (const client of this.clients) client.disconnect();
  }
}

/** Runs `test`; if it fails, adds the end of each process's log to the error. */
export async function showingLogs(processes: ReadonlyArray<{ log(): string } | undefined>, test: () => Promise<void>): Promise<void> {
  try {
    await test();
  } catch (error) {
    const tails = processes.map((p, i) => p && `--- process ${i}:\n${p.log().split('\n').filter((line) => !/method failed/.test(line)).slice(-25).join('\n')}`);
    const logs = `\n${tails.filter(Boolean).join('\n')}`;
    (error as Error).message += logs;
    // An AssertionError's stack (what the reporter prints) was written before: it gets the logs too.
    if ((error as Error).stack && !(error as Error).stack!.includes(logs)) (error as Error).stack += logs;
    throw error;
  }
}

/** The ids in a MongoDB database's `items`. */
export async function storedIds(url: string): Promise<Set<string>> {
  const client = new MongoClient(url);
  try {
    const docs = await client.db().collection<{ _id: string }>('items').find({}, { projection: { _id: 1 } }).toArray();
    return new Set(docs.map((doc) => doc._id));
  } finally {
    await client.close();
  }
}

/** The ids a fresh client sees in the `items` publication: the server's truth, when the database is the embedded store. */
export async function publishedIds(url: string): Promise<Set<string>> {
  const client = new DDPClient(url, { backoff: BACKOFF });
  try {
    await client.subscribe('items').ready;
    return new Set(client.collection('items').find().map((doc) => String(doc._id)));
  } finally {
    client.disconnect();
  }
}
