/**
 * What the APM keeps per publication (Kadira's pub metrics): subscriptions
 * started and stopped, active now, errors, time to ready, lifetime, documents
 * sent initially and live with their bytes (the encoded size of the
 * messages), and observer reuse. Live documents are counted by the live
 * query once per change and publication (with how many subscribers got it),
 * never once per subscriber.
 */
import type { ChangeKind } from './live-query-stats.js';
import { Histogram, WindowedHistogram, type HistogramData } from './histogram.js';

export interface PublicationWindow {
  subs: number;
  errors: number;
  ready: HistogramData;
}

export class PublicationStats {
  subs = 0;
  unsubs = 0;
  active = 0;
  errors = 0;
  readonly ready = new WindowedHistogram();
  readonly lifetime = new Histogram();
  initialDocs = 0;
  initialBytes = 0;
  liveAdded = 0;
  liveChanged = 0;
  liveRemoved = 0;
  liveAddedBytes = 0;
  liveChangedBytes = 0;
  liveRemovedBytes = 0;
  observersCreated = 0;
  observersReused = 0;
  private current = { subs: 0, errors: 0 };
  private previous = { subs: 0, errors: 0 };

  constructor(readonly name: string) {}

  subscribed(): void {
    this.subs++;
    this.active++;
    this.current.subs++;
  }

  readyAfter(ms: number): void {
    this.ready.record(ms);
  }

  failed(): void {
    this.errors++;
    this.current.errors++;
  }

  stopped(lifetimeMs: number): void {
    this.unsubs++;
    this.active--;
    this.lifetime.record(lifetimeMs);
  }

  /** A cursor of one of its subscriptions attached to a live query: a new one, or one already running (reused). */
  observer(reused: boolean): void {
    if (reused) this.observersReused++;
    else this.observersCreated++;
  }

  /** A subscription became ready with `docs` documents from its cursors. */
  readyWith(docs: number): void {
    this.initialDocs += docs;
  }

  /** A cursor of one of its subscriptions was sent its live query's current result, `bytes` in all. */
  sentInitially(bytes: number): void {
    this.initialBytes += bytes;
  }

  /** One change of a live query, `bytes` long, sent to `subscribers` subscriptions of this publication. */
  sentLive(kind: ChangeKind, subscribers: number, bytes: number): void {
    const total = bytes * subscribers;
    if (kind === 'added') {
      this.liveAdded += subscribers;
      this.liveAddedBytes += total;
    } else if (kind === 'changed') {
      this.liveChanged += subscribers;
      this.liveChangedBytes += total;
    } else {
      this.liveRemoved += subscribers;
      this.liveRemovedBytes += total;
    }
  }

  rotate(): void {
    this.ready.rotate();
    const recycled = this.previous;
    recycled.subs = 0;
    recycled.errors = 0;
    this.previous = this.current;
    this.current = recycled;
  }

  recent(): PublicationWindow {
    return { subs: this.current.subs + this.previous.subs, errors: this.current.errors + this.previous.errors, ready: this.ready.recent().data() };
  }
}
