/**
 * The multiplexer registry: one live query per distinct query (canonical key),
 * shared by every observer in the process; one change-source subscription per
 * collection that has live queries.
 */
import type { StorageDriver } from '../data/driver.js';
import type { Document, QuerySpec } from '../data/types.js';
import { idStringify } from '../ddp/ids.js';
import { createLogger, type Logger } from '../log.js';
import { apm } from '../metrics/apm.js';
import { liveQueryMetrics } from './reactive-metrics.js';
import { queryKey } from '../query/key.js';
import { selectorIds } from '../query/selector.js';
import type { ChangeEvent } from '../data/change-source.js';
import { LiveQuery, type LiveQueryObserver } from './live-query.js';
import { ChangeRouter } from './change-router.js';

export interface ObserveHandle {
  readonly query: LiveQuery;
  /** Whether the observer joined a live query that was already running (observer reuse). */
  readonly reused: boolean;
  stop(): void;
}

export interface RegistryOptions {
  /** Minimum time between re-runs of a query that cannot be maintained from events (Meteor: 50 ms). */
  requeryThrottleMs?: number;
  /** Extra documents a sorted, limited query keeps beyond its window. */
  windowBuffer?: number;
  /** Changes a busy live query may queue before it gives up on them and re-reads (Meteor: 2000). */
  maxQueuedChanges?: number;
  /** Route each change only to the live queries it can concern (default true; false hands every change to every query). */
  routeChanges?: boolean;
}

interface CollectionWatch {
  readonly router: ChangeRouter;
  /** Queries handed a change since they were last seen settled: all a write fence needs to ask. */
  readonly unsettled: Set<LiveQuery>;
  readonly unwatch: () => void;
}

export class LiveQueryRegistry {
  private readonly queries = new Map<string, LiveQuery>();
  /** Observers attached plus observers still waiting for the query to load, per query. */
  private readonly holds = new Map<LiveQuery, number>();
  private readonly collections = new Map<string, CollectionWatch>();
  private readonly fetches = new Map<string, Promise<Document | undefined>>();
  /** When each live query started and what followed its changes, for the APM's lifetime histogram and figures by source. */
  private readonly startedAt = new WeakMap<LiveQuery, { at: number; source: string }>();
  private readonly log: Logger;

  constructor(
    private readonly driver: StorageDriver,
    private readonly options: RegistryOptions = {},
  ) {
    this.log = createLogger('live-query');
  }

  /** Attaches `observer` to the live query for `spec`, starting one if none runs; resolves after the initial replay. */
  async observe(spec: QuerySpec, observer: LiveQueryObserver): Promise<ObserveHandle> {
    const key = queryKey(spec);
    let query = this.queries.get(key);
    const reused = query !== undefined;
    if (query) liveQueryMetrics.reused.inc();
    else query = this.start(key, spec);
    this.holds.set(query, (this.holds.get(query) ?? 0) + 1);
    try {
      await query.ready;
    } catch (error) {
      this.release(query);
      throw error;
    }
    query.attach(observer);
    liveQueryMetrics.observers.inc();
    let stopped = false;
    const attached = query;
    return {
      query,
      reused,
      stop: () => {
        if (stopped) return;
        stopped = true;
        liveQueryMetrics.observers.dec();
        attached.detach(observer);
        this.release(attached);
      },
    };
  }

  /**
   * Undefined when every live query of `collection` has applied the write with
   * this token; otherwise a promise for that moment (what write fences wait on).
   */
  settled(collection: string, token: unknown): Promise<void> | undefined {
    const delivered = this.driver.changes.delivered(token);
    if (typeof delivered === 'number') return this.collectionSettled(collection);
    return delivered.then(() => this.collectionSettled(collection));
  }

  /** Live queries running now, for metrics and diagnostics. */
  list(): LiveQuery[] {
    return [...this.queries.values()];
  }

  /** The live queries a change of its collection would be handed to (diagnostics and tests). */
  routed(event: ChangeEvent): LiveQuery[] {
    const watch = this.collections.get(event.collection);
    return watch ? [...watch.router.route(event)] : [];
  }

  /** What each live query is, what serves it and why: for the stats endpoint and the logs. */
  describe(): Array<Record<string, unknown>> {
    return this.list().map((q) => ({
      collection: q.collection,
      selector: q.spec.selector,
      sort: q.spec.sort,
      limit: q.spec.limit,
      skip: q.spec.skip,
      strategy: q.strategy,
      why: q.reason,
      source: this.driver.changes.name,
      observers: q.observerCount,
      documents: q.size,
    }));
  }

  stopAll(): void {
    for (const query of [...this.queries.values()]) this.drop(query);
  }

  private collectionSettled(collection: string): Promise<void> | undefined {
    const watch = this.collections.get(collection);
    if (!watch) return undefined;
    let waits: Array<Promise<void>> | undefined;
    for (const query of watch.unsettled) {
      const settled = query.settled();
      if (settled) (waits ??= []).push(settled);
      else watch.unsettled.delete(query);
    }
    return waits && Promise.all(waits).then(() => undefined);
  }

  private start(key: string, spec: QuerySpec): LiveQuery {
    // Watch first: the live query's initial read must not miss a change made meanwhile.
    let watch = this.collections.get(spec.collection);
    if (!watch) {
      const router = new ChangeRouter(this.options.routeChanges ?? true);
      const unsettled = new Set<LiveQuery>();
      const unwatch = this.driver.changes.watch(spec.collection, (event: ChangeEvent) => {
        for (const q of router.route(event)) {
          q.onEvent(event);
          unsettled.add(q);
        }
      });
      watch = { router, unsettled, unwatch };
      this.collections.set(spec.collection, watch);
    }
    const router = watch.router;
    // Before the query asks whether the source is ready: a source subscribing by document must subscribe this query's first.
    this.reportInterest(spec.collection, spec);
    const query = new LiveQuery(key, spec, this.driver.collection(spec.collection), {
      requeryThrottleMs: this.options.requeryThrottleMs ?? 50,
      windowBuffer: this.options.windowBuffer ?? Math.max(10, spec.limit ?? 0),
      fetchDocument: (id, seq) => this.fetch(spec.collection, id, seq),
      maxQueued: this.options.maxQueuedChanges ?? 2000,
      sourceReady: () => this.driver.changes.ready?.(spec.collection),
      log: this.log,
    });
    this.queries.set(key, query);
    if (router.add(query)) {
      query.reportTo({
        held: (id) => router.held(query, id),
        released: (id) => router.released(query, id),
        catchingUp: (on) => router.setCatchingUp(query, on),
      });
    }
    liveQueryMetrics.created.inc();
    liveQueryMetrics.active.inc();
    if (apm.enabled) {
      const source = this.driver.changes.kind;
      apm.liveQueries.started(query.strategy, source);
      this.startedAt.set(query, { at: performance.now(), source });
    }
    // A query that re-runs on every change is a cost worth seeing without debug logs.
    (query.strategy === 'requery' ? this.log.info : this.log.debug)('live query started', {
      collection: spec.collection,
      strategy: query.strategy,
      why: query.reason,
      source: this.driver.changes.name,
      key,
    });
    return query;
  }

  private release(query: LiveQuery): void {
    const left = (this.holds.get(query) ?? 1) - 1;
    if (left > 0) this.holds.set(query, left);
    else this.drop(query);
  }

  private drop(query: LiveQuery): void {
    if (this.queries.get(query.key) !== query) return;
    this.queries.delete(query.key);
    this.holds.delete(query);
    query.stop();
    liveQueryMetrics.stopped.inc();
    liveQueryMetrics.active.dec();
    const started = this.startedAt.get(query);
    if (started !== undefined) apm.liveQueries.stopped(query.strategy, started.source, performance.now() - started.at);
    const watch = this.collections.get(query.collection);
    if (watch) {
      watch.router.remove(query, query.heldKeys());
      watch.unsettled.delete(query);
      if (watch.router.size === 0) {
        watch.unwatch();
        this.collections.delete(query.collection);
      } else this.reportInterest(query.collection);
    }
  }

  /** Tells the change source which documents of `collection` its live queries (and `starting`) can be changed by. */
  private reportInterest(collection: string, starting?: QuerySpec): void {
    const report = this.driver.changes.interest;
    const watch = this.collections.get(collection);
    if (!report || !watch) return;
    const ids = new Set<string>();
    const specs = [...watch.router.queries()].map((query) => query.spec);
    if (starting) specs.push(starting);
    for (const spec of specs) {
      const named = selectorIds(spec.selector);
      if (!named) return report.call(this.driver.changes, collection, 'all');
      for (const id of named) ids.add(idStringify(id));
    }
    report.call(this.driver.changes, collection, ids);
  }

  /** One read per (document, change) however many live queries need it. */
  private fetch(collection: string, id: unknown, seq: number): Promise<Document | undefined> {
    const key = `${collection}\u0000${idStringify(id)}\u0000${seq}`;
    let pending = this.fetches.get(key);
    if (!pending) {
      pending = this.driver
        .collection(collection)
        .find({ collection, selector: { _id: id } })
        .then((result) => result.docs[0])
        .finally(() => this.fetches.delete(key));
      this.fetches.set(key, pending);
    }
    return pending;
  }
}
