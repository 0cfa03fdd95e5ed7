/**
 * What the APM keeps per publication (Kadira's pub metrics): subscriptions
 * started and stopped, active now, errors, time to ready, lifetime, documents
 * sent initially and live, and observer reuse. Live documents are
 * counted by the live query once per change and publication (with how many
 * subscribers got it), never once per subscriber.
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
  liveAdded = 0;
  liveChanged = 0;
  liveRemoved = 0;
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

  sentInitially(docs: number): void {
    this.initialDocs += docs;
  }

  /** One change of a live query, sent to `subscribers` subscriptions of this publication. */
  sentLive(kind: ChangeKind, subscribers: number): void {
    if (kind === 'added') this.liveAdded += subscribers;
    else if (kind === 'changed') this.liveChanged += subscribers;
    else this.liveRemoved += subscribers;
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
