/**
 * A MongoDB client for a helper that must outlive a database that is down
 * when it starts (the cluster's registry, which `perseid autoscale` reads for
 * weeks). The driver's client whose first connection fails stays closed for
 * good (every later operation: "Topology is closed"), so this one connects on
 * first use and, after a failed attempt, makes a new client at a later use:
 * 1 s after the first failure, doubling to 10 s, uses in between failing at
 * once with the attempt's error. Once connected, the driver itself follows
 * the server through later outages.
 */
import type { Db, MongoClient } from 'mongodb';
import { DatabaseUnavailableError } from '../driver.js';
import { connectMongo } from './connect.js';

const MAX_BACKOFF_MS = 10_000;

export class ReconnectingClient {
  private client: Promise<MongoClient> | undefined;
  private retryAt = 0;
  private failures = 0;
  private lastError: Error | undefined;
  private closed = false;

  constructor(
    private readonly url: string,
    private readonly serverSelectionTimeoutMs = 10_000,
  ) {}

  /** The URL's database, once connected; rejects with why it cannot connect. */
  async db(): Promise<Db> {
    return (await this.connected()).db();
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = await this.client?.catch(() => undefined);
    await client?.close();
  }

  private connected(): Promise<MongoClient> {
    if (this.closed) return Promise.reject(new Error('the MongoDB client is closed'));
    if (this.client) return this.client;
    if (Date.now() < this.retryAt) return Promise.reject(this.lastError!);
    this.client = connectMongo(this.url, this.serverSelectionTimeoutMs).then(
      (client) => {
        this.failures = 0;
        return client;
      },
      (error: unknown) => {
        this.client = undefined;
        this.lastError = new Error(error instanceof DatabaseUnavailableError ? error.detail : (error as Error).message);
        this.retryAt = Date.now() + Math.min(MAX_BACKOFF_MS, 1000 * 2 ** this.failures++);
        throw this.lastError;
      },
    );
    return this.client;
  }
}
