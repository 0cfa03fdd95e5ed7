/**
 * One live query: the current result of a query, kept up to date from change
 * events and shared by every observer of that query (DDP notes §4.3).
 *
 * Strategies, chosen from the query's shape:
 * - `set`: no limit or skip. Inserts and updates are matched against the event's
 *   document; deletes need nothing. No database read after the first.
 * - `window`: sort with limit and/or skip. Keeps the sorted first
 *   `skip + limit + buffer` matches; a document leaving the window is replaced
 *   from the buffer, and only an exhausted buffer costs a re-query.
 * - `requery`: shapes a single document cannot decide (`$where`, `$near`, limit
 *   without sort, ...) re-run the query, throttled, and diff.
 */
import type { CollectionDriver } from '../data/driver.js';
import type { Document, QuerySpec } from '../data/types.js';
import { idStringify } from '../ddp/ids.js';
import type { Logger } from '../log.js';
import { messageBytes } from '../metrics/message-size.js';
import { liveQueryMetrics } from './reactive-metrics.js';
import { applyModifier, parseModifier } from '../query/modifier.js';
import { compileProjection, widenProjection, type Projector } from '../query/projection.js';
import { compileSelector, type Matcher } from '../query/selector.js';
import { compileStableSort, sortsNaturally, type Comparator } from '../query/sort.js';
import type { ChangeEvent } from '../data/change-source.js';
import { DocChange, ResultEntry, diffFields, type Fields } from './doc-change.js';

export interface LiveQueryObserver {
  /** Called by `attach` just before the initial replay: from here on the observer reflects this query. */
  attached?(query: LiveQuery): void;
  onChange(change: DocChange): void;
  /** Where the APM counts the changes this observer is sent (its publication's figures), once per change for all observers sharing it. */
  readonly changeCounter?: ChangeCounter;
}

/** Counts changes sent, `subscribers` at a time (see LiveQueryObserver.changeCounter), and their encoded size. */
export interface ChangeCounter {
  /** One change, whose shared message has `bytes`, went to `subscribers` observers. */
  sentLive(kind: 'added' | 'changed' | 'removed', subscribers: number, bytes: number): void;
  /** An observer attached and was sent the current result: `bytes` over its `added` messages. */
  sentInitially(bytes: number): void;
}

export type Strategy = 'set' | 'window' | 'requery';

/** Update operators whose repetition leaves the document as once applied. */
const IDEMPOTENT_OPERATORS = new Set(['$set', '$unset', '$addToSet', '$pull', '$pullAll', '$min', '$max']);

export interface LiveQueryOptions {
  /** Minimum time between two re-runs of a `requery` live query. */
  requeryThrottleMs: number;
  /** Extra sorted documents a `window` live query keeps beyond skip + limit. */
  windowBuffer: number;
  /** Reads one document after change `seq`; reads of the same document for the same change are shared. */
  fetchDocument(id: unknown, seq: number): Promise<Document | undefined>;
  /** Changes that may wait while the query is busy; beyond that it drops them and re-reads (it has fallen behind). */
  maxQueued: number;
  /** Resolves when the change source receives this collection's changes (see ChangeSource.ready). */
  sourceReady(): Promise<void> | undefined;
  log: Logger;
}

export interface RoutingHooks {
  held(key: string): void;
  released(key: string): void;
  /** True while the query queues events (loading, or waiting for a read): it must then see every one. */
  catchingUp(on: boolean): void;
}

/** A map that reports the keys it gains and loses. */
class HeldMap<V> extends Map<string, V> {
  constructor(private readonly hooks: RoutingHooks) {
    super();
  }

  override set(key: string, value: V): this {
    if (!super.has(key)) this.hooks.held(key);
    return super.set(key, value);
  }

  override delete(key: string): boolean {
    const had = super.delete(key);
    if (had) this.hooks.released(key);
    return had;
  }

  override clear(): void {
    for (const key of super.keys()) this.hooks.released(key);
    super.clear();
  }
}

function chooseStrategy(spec: QuerySpec, matcher: Matcher): { strategy: Strategy; reason: string } {
  if (!matcher.incremental) return { strategy: 'requery', reason: 'the selector needs the whole query re-run ($where, $near, $text or $expr)' };
  if (sortsNaturally(spec.sort)) return { strategy: 'requery', reason: 'a $natural sort is the database\'s own order, which no change event tells' };
  if ((spec.limit || spec.skip) && !spec.sort) return { strategy: 'requery', reason: 'limit or skip without sort has no stable window' };
  if (spec.limit || spec.skip) return { strategy: 'window', reason: 'sorted window kept from change events with a buffer' };
  return { strategy: 'set', reason: 'matched from change events' };
}

export class LiveQuery {
  readonly strategy: Strategy;
  readonly reason: string;
  readonly collection: string;
  private readonly matcher: Matcher;
  private readonly projector: Projector;
  private readonly comparator: Comparator | undefined;
  /** Top-level fields the selector and the sort read: an update touching none of them cannot bring a document in. */
  readonly reads: ReadonlySet<string> | 'all';

  private state: 'loading' | 'ready' | 'failed' | 'stopped' = 'loading';
  /** What observers see: published documents by DDP id. */
  private published = new Map<string, ResultEntry>();
  /** `window` only: the sorted first matches (published ones and the buffer), and whether that is all of them. */
  private ordered: ResultEntry[] = [];
  private inOrdered = new Map<string, ResultEntry>();
  /** Told which documents the query holds and when it is catching up, when changes are routed to it by those. */
  private routing: RoutingHooks | undefined;
  private complete = true;
  private reportedCatchingUp = true;

  /**
   * Attached and detached in constant time (each copied the whole list: a query
   * shared by 40,000 subscriptions spent most of its CPU there), with each
   * one's place in the list to remove it by.
   */
  private observers: LiveQueryObserver[] = [];
  private readonly observerIndex = new Map<LiveQueryObserver, number>();
  /** The list `emit` is going through, which an observer attached or detached meanwhile must not change: it is copied first. */
  private emitting: LiveQueryObserver[] | undefined;
  /** Observers per change counter (the APM's per-publication figures). */
  private readonly counters = new Map<ChangeCounter, number>();
  /** Events that arrived while loading or while asynchronous work was under way, applied in order after it. */
  private queue: ChangeEvent[] = [];
  private working = false;
  private requeryWanted = false;
  private requeryTimer: NodeJS.Timeout | undefined;
  private lastRequeryAt = 0;
  private failedRequeries = 0;
  /** Every event or re-query request takes a ticket; `settled` waits for the tickets issued before it. */
  private ticket = 0;
  private doneTicket = 0;
  private settleWaiters: Array<{ target: number; resolve: () => void }> = [];
  readonly ready: Promise<void>;

  constructor(
    readonly key: string,
    readonly spec: QuerySpec,
    private readonly driver: CollectionDriver,
    private readonly options: LiveQueryOptions,
  ) {
    this.collection = spec.collection;
    this.matcher = compileSelector(spec.selector);
    this.projector = compileProjection(spec.projection);
    this.comparator = spec.sort ? compileStableSort(spec.sort) : undefined;
    ({ strategy: this.strategy, reason: this.reason } = chooseStrategy(spec, this.matcher));
    const read = this.matcher.fields;
    this.reads = read === 'all' ? 'all' : new Set([...read, ...(spec.sort?.map(([path]) => path.split('.')[0]!) ?? [])]);
    this.ready = this.load();
    // Whoever attaches awaits `ready` and sees the error; this only keeps it from being reported as unhandled.
    this.ready.catch(() => undefined);
  }

  /** Waiting for a read: events queue until it is done. */
  private get busy(): boolean {
    return this.working;
  }

  private set busy(on: boolean) {
    this.working = on;
    this.reportCatchingUp();
  }

  private reportCatchingUp(): void {
    const on = this.state === 'loading' || this.working;
    if (on === this.reportedCatchingUp) return;
    this.reportedCatchingUp = on;
    this.routing?.catchingUp(on);
  }

  get size(): number {
    return this.published.size;
  }

  get observerCount(): number {
    return this.observers.length;
  }

  /** Published fields of a document, for merge boxes that combine several queries. */
  fields(key: string): Fields | undefined {
    return this.published.get(key)?.fields;
  }

  forEach(callback: (entry: ResultEntry) => void): void {
    for (const entry of this.published.values()) callback(entry);
  }

  /** Replays the current result to `observer` as additions, then keeps it informed. Call once ready. */
  attach(observer: LiveQueryObserver): void {
    if (this.state !== 'ready') throw new Error(`Live query is ${this.state}`);
    observer.attached?.(this);
    const counter = observer.changeCounter;
    let bytes = 0;
    for (const entry of this.published.values()) {
      const change = entry.addition(this.collection);
      observer.onChange(change);
      // The entry's `added` message, which the replay has just built (or reused) for this observer.
      if (counter) bytes += messageBytes(change.message());
    }
    this.ownObservers();
    this.observerIndex.set(observer, this.observers.push(observer) - 1);
    if (counter) {
      counter.sentInitially(bytes);
      this.counters.set(counter, (this.counters.get(counter) ?? 0) + 1);
    }
  }

  /** Copies the list of observers if `emit` is going through it (copy on write, only when it must). */
  private ownObservers(): void {
    if (this.emitting === this.observers) this.observers = this.observers.slice();
  }

  /** Returns how many observers remain. */
  detach(observer: LiveQueryObserver): number {
    const at = this.observerIndex.get(observer);
    if (at !== undefined) {
      this.ownObservers();
      this.observerIndex.delete(observer);
      // The last one takes its place: observers are told of a change in no particular order.
      const last = this.observers.pop()!;
      if (last !== observer) {
        this.observers[at] = last;
        this.observerIndex.set(last, at);
      }
    }
    const counter = observer.changeCounter;
    if (counter && at !== undefined) {
      const left = this.counters.get(counter)! - 1;
      if (left > 0) this.counters.set(counter, left);
      else this.counters.delete(counter);
    }
    return this.observers.length;
  }

  /**
   * From now on, reports what it holds (a window's sorted buffer, a superset of
   * what it publishes; else its result) and when it is catching up. Call right
   * after construction, before the first read returns.
   */
  reportTo(hooks: RoutingHooks): void {
    if (this.published.size > 0 || this.inOrdered.size > 0) throw new Error('reportTo must be called before the live query has loaded');
    this.routing = hooks;
    if (this.strategy === 'set') this.published = new HeldMap(hooks);
    if (this.strategy === 'window') this.inOrdered = new HeldMap(hooks);
  }

  /** The documents (DDP ids) this query holds and must hear about. */
  heldKeys(): IterableIterator<string> {
    return this.strategy === 'window' ? this.inOrdered.keys() : this.published.keys();
  }

  stop(): void {
    this.state = 'stopped';
    clearTimeout(this.requeryTimer);
    this.queue = [];
    this.observers = [];
    this.observerIndex.clear();
    this.releaseSettled(Infinity);
  }

  /**
   * Undefined when every change delivered so far has been applied; otherwise a
   * promise for that moment. Write fences wait on this.
   */
  settled(): Promise<void> | undefined {
    if (this.doneTicket >= this.ticket || this.state === 'stopped' || this.state === 'failed') return undefined;
    const target = this.ticket;
    return new Promise((resolve) => this.settleWaiters.push({ target, resolve }));
  }

  onEvent(event: ChangeEvent): void {
    if (this.state === 'stopped' || this.state === 'failed') return;
    liveQueryMetrics.changesSeen.inc();
    const ticket = ++this.ticket;
    if (this.state === 'loading' || this.busy) {
      if (this.queue.length >= this.options.maxQueued) {
        // Too far behind to catch up change by change: one re-read replaces them all.
        liveQueryMetrics.fellBehind.inc();
        this.options.log.warn('live query fell behind its change feed; re-reading it', { collection: this.collection, queued: this.queue.length });
        this.queue = [{ seq: event.seq, collection: this.collection, op: 'resync', reason: 'fell behind' }];
        return;
      }
      this.queue.push(event);
      return;
    }
    this.apply(event);
    if (!this.busy && !this.requeryWanted) this.finish(ticket);
  }

  // ---- loading and re-querying ----

  /**
   * The query a (re)load runs: with the fields the selector and sort read, which
   * the copies changes are applied to need even when the projection hides them;
   * a window reads its buffer too.
   */
  private loadSpec(): QuerySpec {
    const spec = { ...this.spec, projection: widenProjection(this.spec.projection, this.reads) };
    if (this.strategy !== 'window') return spec;
    return { ...spec, skip: undefined, limit: this.windowSize() };
  }

  /** How many sorted matches a window keeps; undefined (all of them) for skip without limit. */
  private windowSize(): number | undefined {
    if (!this.spec.limit) return undefined;
    return (this.spec.skip ?? 0) + this.spec.limit + this.options.windowBuffer;
  }

  private async load(): Promise<void> {
    const spec = this.loadSpec();
    try {
      await this.options.sourceReady();
      const { docs, position } = await this.driver.find(spec);
      liveQueryMetrics.docsRead.inc(docs.length);
      if (this.state === 'stopped') return;
      this.resetTo(docs, spec.limit);
      this.state = 'ready';
      this.reportCatchingUp();
      const queued = this.queue;
      this.queue = [];
      // Events the query already reflects are skipped; later ones are applied.
      this.runQueue(position === undefined ? queued : queued.filter((e) => e.seq > position));
    } catch (error) {
      this.state = 'failed';
      this.reportCatchingUp();
      this.releaseSettled(Infinity);
      throw error;
    }
  }

  private scheduleRequery(): void {
    this.requeryWanted = true;
    if (this.busy || this.requeryTimer) return;
    // After failures (database down) wait longer each time, up to 5 s.
    const backoff = this.failedRequeries ? Math.min(5000, 100 * 2 ** this.failedRequeries) : this.options.requeryThrottleMs;
    const wait = Math.max(0, this.lastRequeryAt + backoff - Date.now());
    this.requeryTimer = setTimeout(() => {
      this.requeryTimer = undefined;
      void this.requery();
    }, wait);
  }

  private async requery(): Promise<void> {
    if (this.state !== 'ready') return;
    // A document read under way (begun while the timer waited) keeps events queued until it
    // ends, and then schedules this again. Running now would put two reads in flight, and the
    // first to end would apply events directly while the other's older result was still to
    // come, undoing them.
    if (this.busy) return;
    this.busy = true;
    this.requeryWanted = false;
    this.lastRequeryAt = Date.now();
    const covers = this.ticket;
    const spec = this.loadSpec();
    try {
      const { docs } = await this.driver.find(spec);
      liveQueryMetrics.docsRead.inc(docs.length);
      liveQueryMetrics.requeries.inc();
      if (this.state !== 'ready') return;
      this.resetTo(docs, spec.limit);
      this.doneTicket = Math.max(this.doneTicket, covers);
      if (this.failedRequeries) this.options.log.info('live query re-read again after failures', { collection: this.collection });
      this.failedRequeries = 0;
    } catch (error) {
      if (!this.failedRequeries) this.options.log.warn('live query could not re-read; retrying with backoff', { collection: this.collection, error: (error as Error).message });
      this.failedRequeries++;
      this.requeryWanted = true;
    } finally {
      this.busy = false;
    }
    const queued = this.queue;
    this.queue = [];
    this.runQueue(queued);
  }

  /** Applies queued events in order, pausing whenever one starts asynchronous work. */
  private runQueue(events: ChangeEvent[]): void {
    for (let i = 0; i < events.length; i++) {
      if (this.state !== 'ready') return;
      if (this.busy) {
        this.queue = events.slice(i).concat(this.queue);
        return;
      }
      this.apply(events[i]!);
    }
    if (this.requeryWanted) this.scheduleRequery();
    else if (!this.busy) this.finish(this.ticket);
  }

  private finish(ticket: number): void {
    if (ticket > this.doneTicket) this.doneTicket = ticket;
    this.releaseSettled(this.doneTicket);
  }

  private releaseSettled(done: number): void {
    if (this.settleWaiters.length === 0) return;
    const waiting = this.settleWaiters;
    this.settleWaiters = [];
    for (const waiter of waiting) {
      if (waiter.target <= done) waiter.resolve();
      else this.settleWaiters.push(waiter);
    }
  }

  // ---- applying changes ----

  private apply(event: ChangeEvent): void {
    try {
      if (event.op === 'resync' || this.strategy === 'requery') {
        this.scheduleRequery();
        return;
      }
      const key = idStringify(event.id);
      if (event.op === 'remove') {
        this.applyDocument(key, event.id, undefined);
      } else if (event.doc) {
        this.applyDocument(key, event.id, event.doc);
      } else if (event.modifier) {
        this.applyUpdate(key, event.id, event.modifier, event.seq);
      } else {
        this.fetchAndApply(key, event.id, event.seq);
      }
    } catch (error) {
      // A document the compiled query cannot evaluate must not wedge the query: re-read instead.
      this.options.log.warn('live query could not apply a change; re-running it', { collection: this.collection, error });
      this.scheduleRequery();
    }
  }

  /**
   * An update the feed reported as a modifier: applied to our copy when we hold
   * the document; otherwise read only if it could bring the document in.
   */
  private applyUpdate(key: string, id: unknown, modifier: Document, seq: number): void {
    const known = this.strategy === 'window' ? this.inOrdered.get(key) : this.published.get(key);
    // Our copy may already include this update (it came from a query or read made after
    // it): re-applying $set/$unset converges, re-applying $inc or $push would not.
    if (known?.doc && !Object.keys(modifier).every((op) => IDEMPOTENT_OPERATORS.has(op))) {
      this.fetchAndApply(key, id, seq);
      return;
    }
    if (known?.doc) {
      let next: Document;
      try {
        next = applyModifier(known.doc, parseModifier(modifier), { selector: { _id: id }, inserting: false });
      } catch {
        this.fetchAndApply(key, id, seq); // an update our copy cannot take (positional, unknown operator): read it
        return;
      }
      this.applyDocument(key, id, next);
    } else if (this.couldEnter(modifier)) {
      this.fetchAndApply(key, id, seq);
    }
  }

  /** Whether an update of a document outside the result could bring it in: it touches a field the selector or sort reads. */
  private couldEnter(modifier: Document): boolean {
    const read = this.reads;
    if (read === 'all') return true;
    for (const [op, args] of Object.entries(modifier)) {
      if (typeof args !== 'object' || args === null) return true;
      for (const [path, value] of Object.entries(args as Document)) {
        if (read.has(path.split('.')[0]!)) return true;
        if (op === '$rename' && read.has(String(value).split('.')[0]!)) return true;
      }
    }
    return false;
  }

  private fetchAndApply(key: string, id: unknown, seq: number): void {
    this.busy = true;
    const ticket = this.ticket;
    this.options
      .fetchDocument(id, seq)
      .then(
        (doc) => {
          liveQueryMetrics.docsRead.inc(doc ? 1 : 0);
          if (this.state === 'ready') this.applyDocument(key, id, doc);
        },
        (error: unknown) => {
          this.options.log.warn('fetching a changed document failed; re-running the query', { collection: this.collection, error });
          this.requeryWanted = true;
        },
      )
      .finally(() => {
        this.busy = false;
        const queued = this.queue;
        this.queue = [];
        if (queued.length === 0 && !this.requeryWanted) this.finish(ticket);
        this.runQueue(queued);
      });
  }

  private fieldsOf(doc: Document): Fields {
    const projected = this.projector.apply(doc);
    delete projected._id;
    return projected;
  }

  private applyDocument(key: string, id: unknown, doc: Document | undefined): void {
    const matches = doc !== undefined && this.matcher.test(doc);
    if (this.strategy === 'window') {
      this.applyToWindow(key, id, matches ? doc : undefined);
      return;
    }
    const entry = this.published.get(key);
    if (matches) {
      if (entry) {
        entry.doc = doc;
        this.change(entry, this.fieldsOf(doc));
      } else this.add(new ResultEntry(id, key, this.fieldsOf(doc), doc));
    } else if (entry) {
      this.remove(entry);
    }
  }

  private add(entry: ResultEntry): void {
    this.published.set(entry.key, entry);
    this.emit(entry.addition(this.collection));
  }

  private remove(entry: ResultEntry): void {
    this.published.delete(entry.key);
    this.emit(DocChange.removed(this.collection, entry.key, entry.fields));
  }

  private change(entry: ResultEntry, fields: Fields): void {
    const change = DocChange.changed(this.collection, entry.key, entry.fields, fields);
    if (!change) return;
    entry.setFields(fields);
    this.emit(change);
  }

  private emit(change: DocChange): void {
    liveQueryMetrics.changesPublished.inc();
    const observers = this.observers;
    const outer = this.emitting;
    this.emitting = observers;
    try {
      for (let i = 0; i < observers.length; i++) observers[i]!.onChange(change);
    } finally {
      this.emitting = outer;
    }
    // Once per change and publication, never per subscriber; the size is the shared message's, which its observers sent.
    if (this.counters.size > 0) {
      const bytes = messageBytes(change.message());
      for (const [counter, subscribers] of this.counters) counter.sentLive(change.kind, subscribers, bytes);
    }
  }

  // ---- the sorted window ----

  private insertionIndex(doc: Document): number {
    const compare = this.comparator!;
    let lo = 0;
    let hi = this.ordered.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compare(this.ordered[mid]!.doc!, doc) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private applyToWindow(key: string, id: unknown, doc: Document | undefined): void {
    const before = this.published.get(key)?.fields;
    const old = this.inOrdered.get(key);
    if (old) {
      this.ordered.splice(this.ordered.indexOf(old), 1);
      this.inOrdered.delete(key);
    }
    let at = -1;
    if (doc) {
      at = this.insertionIndex(doc);
      // Past the end of an incomplete buffer it might not be among the first matches: leave it to a refill.
      if (at < this.ordered.length || this.complete) {
        const fields = this.fieldsOf(doc);
        const entry = old ?? new ResultEntry(id, key, fields);
        entry.doc = doc;
        if (old && diffFields(old.fields, fields)) {
          old.setFields(fields);
        }
        this.ordered.splice(at, 0, entry);
        this.inOrdered.set(key, entry);
      } else {
        at = -1;
        this.complete = false;
      }
    }
    const capacity = this.windowSize();
    if (capacity !== undefined && this.ordered.length > 2 * capacity) {
      for (const dropped of this.ordered.splice(capacity)) this.inOrdered.delete(dropped.key);
      this.complete = false;
    }
    this.publishWindow(key, at, before);
    const needed = (this.spec.skip ?? 0) + (this.spec.limit ?? Infinity);
    if (!this.complete && this.ordered.length < needed) this.scheduleRequery();
  }

  /**
   * Brings `published` in line with the window's slice after one document
   * (`changedKey`, now at `at` in `ordered`, or -1 if it left) was taken out
   * and put back. Every other entry moved by at most one place, so only the
   * entries next to the slice's edges can have crossed one: the work does not
   * grow with the limit.
   */
  private publishWindow(changedKey: string, at: number, before: Fields | undefined): void {
    const skip = this.spec.skip ?? 0;
    const end = this.spec.limit ? skip + this.spec.limit : this.ordered.length;
    const visible = (index: number) => index >= skip && index < end;
    const candidates: Array<[entry: ResultEntry, index: number]> = [];
    for (const index of new Set([skip - 1, skip, end - 1, end])) {
      const entry = this.ordered[index];
      if (entry && entry.key !== changedKey) candidates.push([entry, index]);
    }
    const published = this.published.get(changedKey);
    if (published && !visible(at)) this.remove(before ? new ResultEntry(published.id, changedKey, before) : published);
    for (const [entry, index] of candidates) if (!visible(index) && this.published.has(entry.key)) this.remove(entry);
    for (const [entry, index] of candidates) if (visible(index) && !this.published.has(entry.key)) this.add(entry);
    if (!visible(at)) return;
    const entry = this.ordered[at]!;
    if (!published) this.add(entry);
    else if (before) {
      this.published.set(changedKey, entry);
      const change = DocChange.changed(this.collection, changedKey, before, entry.fields);
      if (change) this.emit(change);
    }
  }

  /** Replaces the whole result with a fresh query's, emitting only the differences. */
  private resetTo(docs: Document[], requested: number | undefined): void {
    if (this.strategy === 'window') {
      const previous = new Map(this.published);
      this.ordered = docs.map((doc) => {
        const key = idStringify(doc._id);
        const known = this.inOrdered.get(key);
        const fields = this.fieldsOf(doc);
        const entry = known && !DocChange.changed(this.collection, key, known.fields, fields) ? known : new ResultEntry(doc._id, key, fields, doc);
        entry.doc = doc;
        return entry;
      });
      this.inOrdered.clear();
      for (const entry of this.ordered) this.inOrdered.set(entry.key, entry);
      this.complete = requested === undefined || docs.length < requested;
      // Re-publish entry by entry: removals, additions, and changes of documents that stay.
      const skip = this.spec.skip ?? 0;
      const end = this.spec.limit ? skip + this.spec.limit : this.ordered.length;
      const visible = new Map(this.ordered.slice(skip, end).map((e) => [e.key, e] as const));
      for (const [key, entry] of previous) if (!visible.has(key)) this.remove(entry);
      for (const [key, entry] of visible) {
        const old = previous.get(key);
        if (!old) this.add(entry);
        else if (old !== entry) {
          this.published.set(key, entry);
          const change = DocChange.changed(this.collection, key, old.fields, entry.fields);
          if (change) this.emit(change);
        }
      }
      return;
    }
    const seen = new Set<string>();
    for (const doc of docs) {
      const key = idStringify(doc._id);
      seen.add(key);
      const entry = this.published.get(key);
      if (entry) {
        entry.doc = doc;
        this.change(entry, this.fieldsOf(doc));
      } else this.add(new ResultEntry(doc._id, key, this.fieldsOf(doc), doc));
    }
    for (const entry of [...this.published.values()]) if (!seen.has(entry.key)) this.remove(entry);
  }
}
