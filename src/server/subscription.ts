/**
 * One subscription of one connection: `this` inside a publish function.
 * A publish function returns a cursor or an array of cursors (each a live query
 * shared with every other subscriber), or publishes by hand with
 * added/changed/removed/ready.
 */
import { Cursor } from '../collections/cursor.js';
import { clone } from '../ddp/ejson.js';
import { encodeAdded, encodeChanged, encodeRemoved, type EncodedMessage } from '../ddp/encoded.js';
import { toClientError } from '../ddp/errors.js';
import { idStringify } from '../ddp/ids.js';
import type { ServerMessage } from '../ddp/messages.js';
import type { Logger } from '../log.js';
import type { DocChange, Fields } from '../reactive/doc-change.js';
import type { ChangeCounter, LiveQuery, LiveQueryObserver } from '../reactive/live-query.js';
import type { ObserveHandle } from '../reactive/registry.js';
import { apm } from '../metrics/apm.js';
import { messageBytes } from '../metrics/message-size.js';
import { endObserveSpan, startObserveSpan, withCallSpan } from '../metrics/otel.js';
import { runInTrace } from '../metrics/trace-scope.js';
import type { Trace } from '../metrics/trace.js';
import type { ConnectionHandle } from './connection-handle.js';
import type { CollectionView, FieldSource, Holder, MergeBox, OutputSink } from './merge-box.js';

export type PublishHandler = (this: Subscription, ...params: unknown[]) => unknown;

/** What a subscription needs from its session. */
export interface SubscriptionHost {
  readonly mergeBox: MergeBox;
  readonly connection: ConnectionHandle;
  readonly userId: string | null;
  readonly log: Logger;
  send(message: ServerMessage): void;
  sendEncoded(message: EncodedMessage): void;
  subscriptionStopped(subscription: Subscription): void;
}

/** One cursor's documents, read from its live query (no copy is kept). */
class CursorHolder implements Holder, LiveQueryObserver {
  alone = false;
  query: LiveQuery | undefined;
  readonly view: CollectionView;
  /** The view's connection, kept here for changes that go straight to it. */
  private readonly sink: OutputSink;

  constructor(
    mergeBox: MergeBox,
    collection: string,
    /** This connection's handling of a change failed: its merge box can no longer be trusted. */
    private readonly failed: (error: unknown) => void,
    /** Its publication's figures, counted by the live query once per change (see LiveQueryObserver). */
    readonly changeCounter?: ChangeCounter,
  ) {
    this.view = mergeBox.register(collection, this);
    this.sink = this.view.sink;
  }

  attached(query: LiveQuery): void {
    this.query = query;
    this.view.sourceKnown(this);
  }

  get source(): FieldSource {
    return this.query ?? this;
  }

  fields(key: string): Fields | undefined {
    return this.query?.fields(key);
  }

  /** Called by the live query for every subscriber in turn: an exception stays with this connection. */
  onChange(change: DocChange): void {
    try {
      // What the view would do for a holder alone: send the live query's shared message.
      if (this.alone) this.sink.sendEncoded(change.message());
      else if (change.kind === 'added') this.view.added(this, change.key, change.after!, change);
      else if (change.kind === 'changed') this.view.changed(this, change.key, change.before!, change.after!, change);
      else this.view.removed(this, change.key, change.before!, change);
    } catch (error) {
      this.failed(error);
    }
  }

  /** Documents its live query publishes now. */
  size(): number {
    return this.query?.size ?? 0;
  }

  forEach(callback: (key: string, fields: Fields) => void): void {
    this.query?.forEach((entry) => callback(entry.key, entry.fields));
  }
}

/** Documents published by hand into one collection; unless history is off, kept to merge and to remove on stop. */
class ManualHolder implements Holder {
  alone = false;
  readonly docs = new Map<string, Fields>();
  readonly view: CollectionView;
  readonly tracked: boolean;

  constructor(mergeBox: MergeBox, collection: string) {
    this.view = mergeBox.register(collection, this);
    this.tracked = this.view.strategy !== 'NO_MERGE_NO_HISTORY';
  }

  get source(): FieldSource {
    return this;
  }

  fields(key: string): Fields | undefined {
    return this.docs.get(key);
  }

  forEach(callback: (key: string, fields: Fields) => void): void {
    for (const [key, fields] of this.docs) callback(key, fields);
  }
}

function withoutId(fields: Fields | undefined): Fields {
  const copy = clone(fields ?? {});
  delete copy._id;
  return copy;
}

export class Subscription {
  private readonly cursorHolders: CursorHolder[] = [];
  private readonly handles: ObserveHandle[] = [];
  private readonly manual = new Map<string, ManualHolder>();
  private readonly stopCallbacks: Array<() => unknown> = [];
  private isReady = false;
  /** Its documents are withdrawn (or the connection is gone). */
  private stopped = false;
  /** Its publish function's calls are ignored and its stop callbacks have run (Meteor's deactivation). */
  private retired = false;
  private unblockHook: (() => void) | undefined;

  constructor(
    private readonly host: SubscriptionHost,
    /** The client's sub id; undefined for universal (unnamed) publications. */
    readonly id: string | undefined,
    readonly name: string | null,
    readonly params: unknown[],
    private readonly handler: PublishHandler,
    /** A re-run (after a login) of a subscription whose `ready` the client already has. */
    readyAlreadySent = false,
    /** Its APM trace (from the sub message's arrival to ready), when the APM is on. */
    private readonly trace?: Trace,
  ) {
    this.isReady = readyAlreadySent;
    this.userId = host.userId;
    this.startedAt = trace ? performance.now() : 0;
    this.counter = apm.changeCounter(trace);
  }

  private readonly startedAt: number;
  /** Where its documents are counted, when traced (its cursors' live queries count theirs there too). */
  private readonly counter: ChangeCounter | undefined;
  /** Documents it sent by hand (`this.added`) before ready. */
  private manualInitialDocs = 0;

  get handlerFunction(): PublishHandler {
    return this.handler;
  }

  /** The user it runs for: a login re-runs subscriptions as new ones, and the old ones keep theirs. */
  readonly userId: string | null;

  get connection(): ConnectionHandle {
    return this.host.connection;
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  get readySent(): boolean {
    return this.isReady;
  }

  /** Runs the publish function; settles once the initial data has been sent (or the subscription failed). */
  async run(unblock?: () => void): Promise<void> {
    this.unblockHook = unblock;
    let result: unknown;
    try {
      const { trace } = this;
      // Its OpenTelemetry span is the active one (the app's spans nest under it). It runs in no write scope
      // (one there, even without a fence, made the FerretDB oplog write-fence test fail): its own reads find
      // the trace in the APM's scope instead, and count in its `db` (the wait for its live queries does, below).
      result = await (trace ? withCallSpan(trace.span, () => runInTrace(trace, () => this.handler.call(this, ...this.params))) : this.handler.call(this, ...this.params));
      if (this.retired) return;
      const cursors = result instanceof Cursor ? [result] : Array.isArray(result) && result.every((c) => c instanceof Cursor) ? (result as Cursor[]) : undefined;
      if (cursors) {
        // An empty array too, as Meteor does: a publication with nothing to show this client is ready at once.
        await this.publishCursors(cursors);
        this.ready();
      } else if (result !== undefined && result !== null) {
        throw new Error('Publish function can only return a Cursor or an array of Cursors');
      }
    } catch (error) {
      this.error(error);
    }
  }

  private async publishCursors(cursors: Cursor[]): Promise<void> {
    const names = new Set<string>();
    for (const { collectionName } of cursors) {
      if (names.has(collectionName)) throw new Error(`Publish function returned multiple cursors for collection ${collectionName}`);
      names.add(collectionName);
    }
    for (const cursor of cursors) {
      const holder = new CursorHolder(
        this.host.mergeBox,
        cursor.collectionName,
        (error) => {
          this.host.log.error('unexpected failure while sending a change; closing the connection', { sub: this.name, session: this.host.connection.id, error });
          this.host.connection.close();
        },
        this.counter,
      );
      this.cursorHolders.push(holder);
      // Waiting for the live query (its first read, or the running one's replay) is the subscription's `db` time.
      // Timed here rather than by running observeLive in the trace's scope: a live query (and a change feed it
      // starts) outlives the subscription and must not carry its scope.
      const { trace } = this;
      const started = trace?.dbStarted();
      const span = startObserveSpan(trace?.span, cursor.collectionName);
      let handle: ObserveHandle;
      try {
        handle = await cursor.observeLive(holder);
      } catch (error) {
        trace?.dbEnded(started!, cursor.collectionName, 'observe', undefined, undefined, error instanceof Error ? error.message : String(error));
        endObserveSpan(span, undefined, undefined, error);
        throw error;
      }
      trace?.dbEnded(started!, cursor.collectionName, 'observe', undefined, holder.size());
      endObserveSpan(span, holder.size(), handle.reused, undefined);
      apm.observerAttached(trace, handle.reused);
      if (this.retired) {
        handle.stop();
        return;
      }
      this.handles.push(handle);
    }
  }

  // ---- the publication API ----

  added(collection: string, id: unknown, fields?: Fields): void {
    if (this.retired) return;
    const key = idStringify(id);
    const holder = this.manualHolder(collection);
    const next = withoutId(fields);
    if (!holder.tracked) {
      this.host.sendEncoded(this.counted('added', encodeAdded(collection, key, next)));
      return;
    }
    const existing = holder.docs.get(key);
    if (existing) this.changed(collection, id, next);
    else {
      // Kept first: a view merging this document with another source reads this holder's fields from it.
      holder.docs.set(key, next);
      holder.view.added(holder, key, next);
      if (this.counter) this.counted('added', encodeAdded(collection, key, next));
    }
  }

  /** Fields set to `undefined` are removed from the document. */
  changed(collection: string, id: unknown, fields: Fields): void {
    if (this.retired) return;
    const key = idStringify(id);
    const holder = this.manualHolder(collection);
    const update = withoutId(fields);
    const message = () => {
      const cleared = Object.keys(fields).filter((name) => fields[name] === undefined);
      return encodeChanged(collection, key, update, cleared.length ? cleared : undefined);
    };
    if (!holder.tracked) {
      this.host.sendEncoded(this.counted('changed', message()));
      return;
    }
    const before = holder.docs.get(key);
    if (!before) {
      this.host.log.warn('changed() for a document this subscription has not added; ignored', { collection, id: key, sub: this.name });
      return;
    }
    const after: Fields = { ...before };
    for (const name of Object.keys(fields)) {
      if (fields[name] === undefined) delete after[name];
      else if (name !== '_id') after[name] = update[name];
    }
    holder.docs.set(key, after);
    holder.view.changed(holder, key, before, after);
    if (this.counter) this.counted('changed', message());
  }

  removed(collection: string, id: unknown): void {
    if (this.retired) return;
    const key = idStringify(id);
    const holder = this.manualHolder(collection);
    if (!holder.tracked) {
      this.host.sendEncoded(this.counted('removed', encodeRemoved(collection, key)));
      return;
    }
    const before = holder.docs.get(key);
    if (!before) return;
    holder.docs.delete(key);
    holder.view.removed(holder, key, before);
    if (this.counter) this.counted('removed', encodeRemoved(collection, key));
  }

  /**
   * Counts a document sent by hand in the publication's figures, as its cursors' are: before ready
   * as initial, after it as live. Tracked documents count what the publication asked to send
   * (the merge box sends less when another subscription already has the document), as cursors do.
   */
  private counted(kind: 'added' | 'changed' | 'removed', message: EncodedMessage): EncodedMessage {
    const { counter } = this;
    if (!counter) return message;
    if (!this.isReady) {
      if (kind === 'added') this.manualInitialDocs++;
      counter.sentInitially(messageBytes(message));
    } else counter.sentLive(kind, 1, messageBytes(message));
    return message;
  }

  ready(): void {
    if (this.retired || this.isReady) return;
    this.isReady = true;
    if (this.id !== undefined) this.host.send({ msg: 'ready', subs: [this.id] });
    if (this.trace) apm.subReady(this.trace, this.initialDocuments());
  }

  /** Stops the subscription with an error the client receives in `nosub`. */
  error(error: unknown): void {
    if (this.retired) return;
    const { error: clientError, expected } = toClientError(error);
    if (!expected) this.host.log.error('publication failed', { sub: this.name, error });
    if (this.trace) apm.subReady(this.trace, 0, error, expected);
    this.deactivate(true);
    if (this.id !== undefined) this.host.send({ msg: 'nosub', id: this.id, error: clientError.toJSON() });
  }

  /** Stops the subscription from the server side. */
  stop(): void {
    if (this.retired) return;
    this.deactivate(true);
    if (this.id !== undefined) this.host.send({ msg: 'nosub', id: this.id });
  }

  onStop(callback: () => unknown): void {
    if (this.retired) this.runStopCallback(callback);
    else this.stopCallbacks.push(callback);
  }

  /** Lets the connection's next message start before this publication is ready (Meteor 3). */
  unblock(): void {
    const hook = this.unblockHook;
    this.unblockHook = undefined;
    hook?.();
  }

  /**
   * Ends what the app sees of it, as Meteor does to every subscription before
   * re-running it for a new user: its publish function's further calls are
   * ignored and its stop callbacks run now, before the re-run starts (an
   * onStop undoing what the publish function did must not undo the re-run's).
   * Its documents stay until `deactivate`.
   */
  retire(): void {
    if (this.retired) return;
    this.retired = true;
    for (const callback of this.stopCallbacks.splice(0)) this.runStopCallback(callback);
  }

  /**
   * Ends the subscription: its documents are removed from the client (unless
   * `removeDocuments` is false, as when the connection itself is gone), but
   * for those its `successor` (its re-run for a new user) publishes.
   */
  deactivate(removeDocuments: boolean, successor?: Subscription): void {
    if (this.stopped) return;
    this.stopped = true;
    this.retired = true;
    if (this.trace) apm.subStopped(this.trace, performance.now() - this.startedAt);
    const { mergeBox } = this.host;
    for (const holder of [...this.cursorHolders, ...this.manual.values()]) {
      const { view } = holder;
      if (removeDocuments && view.strategy !== 'NO_MERGE_NO_HISTORY') {
        holder.forEach((key, fields) => {
          // Unmerged, the removal would reach the client although the re-run has just sent the document again
          // (merged, the merge box sends nothing for it).
          if (view.strategy === 'NO_MERGE' && successor?.publishes(view, key)) return;
          view.removed(holder, key, fields);
        });
      }
      mergeBox.unregister(holder.view, holder);
    }
    for (const handle of this.handles) handle.stop();
    this.host.subscriptionStopped(this);
    for (const callback of this.stopCallbacks.splice(0)) this.runStopCallback(callback);
  }

  /** Whether it publishes document `key` of `view` now. */
  private publishes(view: CollectionView, key: string): boolean {
    if (this.stopped) return false;
    return [...this.cursorHolders, ...this.manual.values()].some((holder) => holder.view === view && holder.source.fields(key) !== undefined);
  }

  /** Documents it published initially: its cursors' (read once, at ready) and those sent by hand. */
  private initialDocuments(): number {
    let n = this.manualInitialDocs;
    for (const holder of this.cursorHolders) n += holder.size();
    return n;
  }

  private runStopCallback(callback: () => unknown): void {
    try {
      const result = callback();
      if (result instanceof Promise) result.catch((error: unknown) => this.host.log.error('onStop callback failed', { sub: this.name, error }));
    } catch (error) {
      this.host.log.error('onStop callback failed', { sub: this.name, error });
    }
  }

  private manualHolder(collection: string): ManualHolder {
    let holder = this.manual.get(collection);
    if (!holder) {
      holder = new ManualHolder(this.host.mergeBox, collection);
      this.manual.set(collection, holder);
    }
    return holder;
  }
}
