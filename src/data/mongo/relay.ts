/**
 * Changes made outside Perseid (a script, another app, the shell) reach the
 * fan-out bus through one relay: the server holding the lease follows the
 * database (change streams, oplog or polling) for every collection the cluster
 * watches, and publishes what it sees. When the lease moves to another server,
 * the new relay starts with a resync of each collection (the gap is unknown).
 * A server that begins to watch a collection says so at once, where the relay
 * reads the watched set and then on the bus, so the relay follows it within a
 * round trip rather than at its next check.
 */
import type { Lease } from '../../coordination/lease.js';
import { FailureLog } from '../../failure-log.js';
import type { WatchedCollections } from '../../fanout/watched-collections.js';
import type { Logger } from '../../log.js';
import { ChangeHub } from './change-hub.js';
import type { ClientHolder } from './client-holder.js';
import type { FanoutFeeder } from './fanout-feeder.js';
import { openDatabaseFeeder, type DatabaseFeeder, type DatabaseSourceChoice } from './feeders.js';

export interface RelayOptions {
  clients: ClientHolder;
  oplogClients: ClientHolder | undefined;
  choice: DatabaseSourceChoice;
  pollIntervalMs: number;
  fanout: FanoutFeeder;
  lease: Lease;
  watched: WatchedCollections;
  /** Collections this server's live queries watch (announced for the relay). */
  ownCollections(): string[];
  log: Logger;
  /** How often leadership and the watched set are checked (ms). */
  intervalMs?: number;
}

export class Relay {
  private hub: ChangeHub | undefined;
  private feeder: DatabaseFeeder | undefined;
  private readonly following = new Map<string, () => void>();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> = Promise.resolve();
  /** The check waiting behind the one under way, if one is. */
  private queued: Promise<void> | undefined;
  private closed = false;
  /** Checks fail every interval while Redis is down: one line when they start failing, one when they work again. */
  private readonly failures: FailureLog;

  constructor(private readonly options: RelayOptions) {
    this.failures = new FailureLog(options.log, 'relay check');
  }

  start(): void {
    const { fanout } = this.options;
    fanout.onWatchStarted = (collection) => this.check().then(() => !this.closed && fanout.watching(collection));
    fanout.onWatchedElsewhere = () => void (this.leading && this.check());
    void this.check();
    this.timer = setInterval(() => void this.check(), this.options.intervalMs ?? 3000);
    this.timer.unref();
  }

  /**
   * Runs a check after the one under way, if any (checks must not overlap: two could both start leading). At most one
   * waits: those asked for meanwhile are that one, so a burst of words on the bus costs one check, not one each.
   */
  private check(): Promise<void> {
    if (this.queued) return this.queued;
    const queued = this.ticking
      .then(() => {
        this.queued = undefined;
        return this.tick();
      })
      .then(
        () => this.failures.succeeded(),
        (error: unknown) => this.failures.failed(error),
      );
    this.queued = queued;
    this.ticking = queued;
    return queued;
  }

  get leading(): boolean {
    return this.feeder !== undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await this.ticking;
    if (this.leading) {
      this.stepDown();
      await this.options.lease.release().catch(() => undefined);
    }
  }

  private async tick(): Promise<void> {
    const { lease, watched } = this.options;
    await watched.announce(this.options.ownCollections());
    if (this.closed) return;
    if ((await lease.acquire()) === undefined) {
      if (this.leading) {
        this.options.log.warn('lost the relay lease; another server relays now');
        this.stepDown();
      }
      return;
    }
    if (!this.leading) await this.lead();
    this.follow(await watched.list());
  }

  private async lead(): Promise<void> {
    const { clients, oplogClients, choice, pollIntervalMs, log } = this.options;
    this.hub = new ChangeHub('relay', { maxWaitMs: 1000, log, counted: false });
    const opened = await openDatabaseFeeder(this.hub, clients, oplogClients, choice, pollIntervalMs, log);
    this.feeder = opened.feeder;
    log.info('this server relays database changes to the fan-out bus', { via: opened.name });
  }

  private follow(collections: string[]): void {
    const { fanout } = this.options;
    const want = new Set(collections);
    for (const [collection, unwatch] of this.following) {
      if (!want.has(collection)) {
        unwatch();
        this.following.delete(collection);
      }
    }
    for (const collection of want) {
      if (this.following.has(collection)) continue;
      this.following.set(
        collection,
        this.hub!.watch(collection, (event) => fanout.relayed(collection, event.op === 'resync' ? 'resync' : { op: event.op, id: event.id, doc: event.doc, modifier: event.modifier })),
      );
      // What changed before this relay followed the collection is unknown: everyone re-reads once.
      void Promise.resolve(this.hub!.ready?.(collection)).then(() => fanout.relayed(collection, 'resync'));
    }
  }

  private stepDown(): void {
    for (const unwatch of this.following.values()) unwatch();
    this.following.clear();
    this.feeder?.close();
    this.hub?.close();
    this.feeder = undefined;
    this.hub = undefined;
  }
}
