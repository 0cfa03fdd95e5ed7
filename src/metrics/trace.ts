/**
 * One method call or subscription, timed the way Kadira did: from the
 * message's arrival, its time splits into `wait` (queued behind earlier
 * messages of its connection), `db` (while at least one database operation
 * of its own was pending), and the gaps between, which are `compute` for the
 * part the event loop was busy and `async` for the part it waited (a timer,
 * other I/O). The busy part is read from the event loop's utilisation, so
 * under load a gap in which other clients' work ran counts as compute too:
 * the loop was busy, and that is what held the call up. `waitedOn` is how
 * long other messages of the connection waited behind it.
 *
 * A trace also keeps its timeline (at most MAX_EVENTS events) for the slowest
 * calls the dashboard shows. It travels with the call in the method's write
 * scope (reactive/write-scope.ts), so the collection API can add its database
 * operations without any other store.
 */
import type { Span } from '@opentelemetry/api';
import { performance } from 'node:perf_hooks';
import { cut, errorText } from './error-text.js';

export type TraceKind = 'method' | 'sub';

export interface TraceEvent {
  type: 'wait' | 'db' | 'compute' | 'async' | 'error';
  /** Milliseconds from the message's arrival. */
  at: number;
  duration: number;
  collection?: string;
  /** The database operation (find, insert, update, remove, count). */
  op?: string;
  /** The query's shape (see query-shape.ts), never its values. */
  shape?: string;
  /** Documents returned or written. */
  docs?: number;
  message?: string;
}

/** A finished trace as data, for reports. */
export interface TraceRecord {
  kind: TraceKind;
  name: string;
  /** When the message arrived, ms since the epoch. */
  at: number;
  total: number;
  wait: number;
  db: number;
  async: number;
  compute: number;
  waitedOn: number;
  events: TraceEvent[];
  /** Events left out past MAX_EVENTS. */
  droppedEvents: number;
  error?: string;
}

const MAX_EVENTS = 64;
/** Gaps shorter than this add to the figures but make no event of their own. */
const MIN_EVENT_MS = 0.05;

function activeMs(): number {
  return performance.eventLoopUtilization().active;
}

/** A Meteor.Error (sent to the client as is) with a 4xx code: Match failed (400), access denied (403), not found (404). */
function isClientError(error: unknown): boolean {
  const e = error as { isClientSafe?: unknown; error?: unknown } | null;
  return typeof e === 'object' && e !== null && e.isClientSafe === true && typeof e.error === 'number' && e.error >= 400 && e.error < 500;
}

export class Trace {
  wait: number;
  db = 0;
  async = 0;
  compute = 0;
  total = 0;
  waitedOn = 0;
  error: { message: string; stack?: string } | undefined;
  /** The error is the client's doing (a Meteor.Error of a 4xx code: a bad argument, a refusal), not the server's. */
  clientError = false;
  /** The OpenTelemetry span of this call, when an SDK records spans. */
  span: Span | undefined;
  finished = false;
  readonly events: TraceEvent[] = [];
  private dropped = 0;
  private readonly epochArrival: number;
  private mark: number;
  private markActive: number;
  private dbDepth = 0;
  private dbSince = 0;

  constructor(
    readonly kind: TraceKind,
    readonly name: string,
    /** performance.now() when the message arrived. */
    private readonly arrived: number,
  ) {
    const now = performance.now();
    this.wait = Math.max(0, now - arrived);
    this.epochArrival = Date.now() - this.wait;
    if (this.wait >= MIN_EVENT_MS) this.push({ type: 'wait', at: 0, duration: this.wait });
    this.mark = now;
    this.markActive = activeMs();
  }

  /** A database operation of this call starts; returns its start time for `dbEnded`. */
  dbStarted(): number {
    const now = performance.now();
    if (this.dbDepth++ === 0) {
      if (!this.finished) this.closeGap(now);
      this.dbSince = now;
    }
    return now;
  }

  dbEnded(started: number, collection: string, op: string, shape: string | undefined, docs: number | undefined, error?: string): void {
    const now = performance.now();
    if (--this.dbDepth > 0 || this.finished) {
      if (!this.finished) this.pushDb(started, now, collection, op, shape, docs, error);
      return;
    }
    this.db += now - this.dbSince;
    this.mark = now;
    this.markActive = activeMs();
    this.pushDb(started, now, collection, op, shape, docs, error);
  }

  /** Ends the call (a method's result, a subscription's ready or error). */
  finish(error?: unknown): void {
    if (this.finished) return;
    const now = performance.now();
    if (this.dbDepth > 0) this.db += now - this.dbSince;
    else this.closeGap(now);
    this.total = now - this.arrived;
    if (error !== undefined) {
      this.error = errorText(error);
      this.clientError = isClientError(error);
      this.push({ type: 'error', at: this.total, duration: 0, message: this.error.message });
    }
    this.finished = true;
  }

  record(): TraceRecord {
    const out: TraceRecord = {
      kind: this.kind,
      name: this.name,
      at: this.epochArrival,
      total: this.total,
      wait: this.wait,
      db: this.db,
      async: this.async,
      compute: this.compute,
      waitedOn: this.waitedOn,
      events: this.events,
      droppedEvents: this.dropped,
    };
    if (this.error) out.error = this.error.message;
    return out;
  }

  private closeGap(now: number): void {
    const gap = now - this.mark;
    if (gap <= 0) return;
    const active = activeMs();
    const busy = Math.min(gap, Math.max(0, active - this.markActive));
    const at = this.mark - this.arrived;
    this.compute += busy;
    this.async += gap - busy;
    if (busy >= MIN_EVENT_MS) this.push({ type: 'compute', at, duration: busy });
    if (gap - busy >= MIN_EVENT_MS) this.push({ type: 'async', at: at + busy, duration: gap - busy });
    this.mark = now;
    this.markActive = active;
  }

  private pushDb(started: number, now: number, collection: string, op: string, shape: string | undefined, docs: number | undefined, error?: string): void {
    const event: TraceEvent = { type: 'db', at: started - this.arrived, duration: now - started, collection, op };
    if (shape !== undefined) event.shape = shape;
    if (docs !== undefined) event.docs = docs;
    if (error !== undefined) event.message = cut(error);
    this.push(event);
  }

  private push(event: TraceEvent): void {
    if (this.events.length < MAX_EVENTS) this.events.push(event);
    else this.dropped++;
  }
}
