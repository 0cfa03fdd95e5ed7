/**
 * The store's current MongoClient, and the watchdog that replaces it when it
 * is wedged. The driver (7.x) sometimes never rediscovers a restarted server
 * (FerretDB, about 1 restart in 5 under load): its monitor keeps the server
 * Unknown, or its operations get no answer, for 30 s and more, while a new
 * client on the same URL connects at once. No driver option was found
 * that prevents it, so: when operations have failed as unavailable for
 * `wedgedAfterMs` (3 s) and a fresh client can `ping` while the current one still
 * cannot, the fresh one takes over. Everything that talks to the database asks
 * the holder for the current client (collections, feeders), runs its
 * operations through `run` (which also gives them a deadline), and feeders that
 * hold a cursor restart on the new client from where they were (onReplaced).
 */
import { MongoError, MongoNetworkError, MongoNotConnectedError, MongoServerClosedError, MongoServerSelectionError, MongoTopologyClosedError, type Collection, type Db, type MongoClient } from 'mongodb';
import { withDeadline } from '../../deadline.js';
import type { Logger } from '../../log.js';
import { dataMetrics } from '../data-metrics.js';
import { DatabaseUnavailableError } from '../driver.js';

/** Server error codes that mean "not now" (shutting down, stepping down, unreachable): the retryable ones of MongoDB's specifications. */
const UNAVAILABLE_CODES = new Set([6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436]);

/** Whether a driver error means the database cannot be reached or cannot serve now (a client may retry), rather than a bad request. */
export function isUnavailable(error: unknown): boolean {
  if (error instanceof DatabaseUnavailableError) return true;
  if (error instanceof MongoServerSelectionError || error instanceof MongoNetworkError || error instanceof MongoNotConnectedError) return true;
  if (error instanceof MongoServerClosedError || error instanceof MongoTopologyClosedError) return true;
  if (!(error instanceof MongoError)) return false;
  // The pool's own errors are not exported as classes.
  if (error.name === 'MongoPoolClosedError' || error.name === 'MongoWaitQueueTimeoutError') return true;
  return error.hasErrorLabel('RetryableWriteError') || (typeof error.code === 'number' && UNAVAILABLE_CODES.has(error.code));
}

/** Rejects with a DatabaseUnavailableError when `operation` has no answer within `ms` (the driver has no deadline for a connection that went silent). */
function answeredWithin<T>(operation: Promise<T>, ms: number): Promise<T> {
  return withDeadline(operation, ms, () => new DatabaseUnavailableError(`MongoDB gave no answer within ${ms} ms (the operation's outcome is unknown)`));
}

export interface ClientHolderOptions {
  /** What the client is for, in log lines ('database', 'oplog'). */
  role: string;
  /** Opens a new connected client on the same URL, giving up after `timeoutMs`. */
  connect(timeoutMs: number): Promise<MongoClient>;
  log: Logger;
  /** An operation with no answer after this long fails as unavailable. */
  operationTimeoutMs: number;
  /** How long operations must have failed as unavailable, with no success between, before a fresh client is tried (default 3000 ms). */
  wedgedAfterMs?: number;
  /** How long the fresh client, and then the current one, get to answer a `ping` (default 2000 ms). */
  probeTimeoutMs?: number;
}

/** Pauses between probes that found the database unreachable to a fresh client too (a real outage): 1 s, doubling up to 4 s. */
const PROBE_BACKOFF_MS = [1000, 2000, 4000];

export class ClientHolder {
  private current: MongoClient;
  private currentDb: Db;
  private readonly rawCollections = new Map<string, Collection>();
  private readonly listeners = new Set<(client: MongoClient) => void>();
  private readonly recoveredListeners = new Set<() => void>();
  private failingSince: number | undefined;
  private probing = false;
  private probeFailures = 0;
  private nextProbeAt = 0;
  private closed = false;
  /** How many times the client was replaced (for tests and the log). */
  replacements = 0;

  constructor(
    client: MongoClient,
    private readonly options: ClientHolderOptions,
  ) {
    this.current = client;
    this.currentDb = client.db();
  }

  get client(): MongoClient {
    return this.current;
  }

  /** The URL's database on the current client. */
  get db(): Db {
    return this.currentDb;
  }

  /** A collection of the URL's database on the current client. */
  collection(name: string): Collection {
    let raw = this.rawCollections.get(name);
    if (!raw) {
      raw = this.currentDb.collection(name);
      this.rawCollections.set(name, raw);
    }
    return raw;
  }

  /** Calls `listener` with the new client after each replacement (the old one is closed right after); returns the unsubscribe. */
  onReplaced(listener: (client: MongoClient) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Calls `listener` when an operation works again after operations failed as unavailable; returns the unsubscribe. */
  onRecovered(listener: () => void): () => void {
    this.recoveredListeners.add(listener);
    return () => this.recoveredListeners.delete(listener);
  }

  /** Runs one operation on the current client with a deadline, and records how it went. */
  async run<T>(operation: () => Promise<T>): Promise<T> {
    const client = this.current;
    const started = Date.now();
    try {
      const result = await answeredWithin(operation(), this.options.operationTimeoutMs);
      this.succeeded(client);
      return result;
    } catch (error) {
      this.failed(error, client, started);
      throw error;
    }
  }

  /** An operation on `client` worked: it is not wedged. */
  succeeded(client: MongoClient): void {
    if (client !== this.current) return;
    const recovered = this.failingSince !== undefined;
    this.failingSince = undefined;
    this.probeFailures = 0;
    this.nextProbeAt = 0;
    if (recovered) for (const listener of this.recoveredListeners) listener();
  }

  /**
   * An operation on `client`, started at `since`, failed; failures to reach the database for long
   * enough start a probe. An operation that timed out had no answer since it started.
   */
  failed(error: unknown, client: MongoClient, since = Date.now()): void {
    if (client !== this.current || this.closed || !isUnavailable(error)) return;
    const now = Date.now();
    this.failingSince = Math.min(this.failingSince ?? since, since);
    if (this.probing || now - this.failingSince < (this.options.wedgedAfterMs ?? 3000) || now < this.nextProbeAt) return;
    this.probing = true;
    void this.probe().finally(() => (this.probing = false));
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
    this.recoveredListeners.clear();
    await this.current.close();
  }

  /** Whether a fresh client can reach the database while the current one cannot; if so, the fresh one takes over. */
  private async probe(): Promise<void> {
    const ms = this.options.probeTimeoutMs ?? 2000;
    const current = this.current;
    const failingFor = Date.now() - this.failingSince!;
    let fresh: MongoClient | undefined;
    try {
      fresh = await this.options.connect(ms);
      await answeredWithin(fresh.db().command({ ping: 1 }), ms);
    } catch {
      // The database is down for everyone: the current client is not to blame. Try again later.
      await fresh?.close().catch(() => undefined);
      this.nextProbeAt = Date.now() + PROBE_BACKOFF_MS[Math.min(this.probeFailures++, PROBE_BACKOFF_MS.length - 1)]!;
      return;
    }
    // Given the same time, a current client that is merely slow to notice the server is back answers too: keep it.
    const currentAnswers = await answeredWithin(current.db().command({ ping: 1 }), ms).then(
      () => true,
      () => false,
    );
    if (currentAnswers || this.closed || current !== this.current) {
      await fresh.close().catch(() => undefined);
      if (currentAnswers) this.succeeded(current);
      return;
    }
    this.replace(fresh, `operations failed for ${Math.round(failingFor / 1000)} s and it cannot ping, while a new client can`);
  }

  private replace(fresh: MongoClient, why: string): void {
    const old = this.current;
    this.current = fresh;
    this.currentDb = fresh.db();
    this.rawCollections.clear();
    this.failingSince = undefined;
    this.probeFailures = 0;
    this.nextProbeAt = 0;
    this.replacements++;
    dataMetrics.clientsReplaced.inc();
    this.options.log.warn(`replaced the ${this.options.role} client`, { why });
    for (const listener of this.listeners) {
      try {
        listener(fresh);
      } catch (error) {
        this.options.log.error('restarting on the new client failed', { error: (error as Error).message });
      }
    }
    // Operations still waiting on the old client fail now (as unavailable) instead of at their deadline.
    void old.close().catch(() => undefined);
  }
}
