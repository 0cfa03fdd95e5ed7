/**
 * Once-per-turn output. Connections queue messages during an event-loop turn and
 * are flushed together in the check phase, one write per connection. Connections
 * that queued the same messages in the same order (the usual case for a
 * broadcast) share one joined buffer instead of joining their own.
 */
import type { EncodedMessage } from '../ddp/encoded.js';
import type { FrameVariant } from './frames.js';
import { transportMetrics } from './transport-metrics.js';

export interface Flushable {
  flush(batches: BatchCache): void;
  /** `flush` threw: close this connection (and log it); the others are flushed as usual. */
  failed(error: unknown): void;
}

export class BatchCache {
  private messages: readonly EncodedMessage[] | undefined;
  private variant: FrameVariant | undefined;
  private buffer: Buffer | undefined;

  /** The joined frames of `messages`, reusing the previous result when the batch is the same. */
  join(messages: readonly EncodedMessage[], variant: FrameVariant, frame: (m: EncodedMessage) => Buffer): Buffer {
    if (this.buffer && variant === this.variant && this.sameAs(messages)) return this.buffer;
    const frames = messages.map(frame);
    this.messages = messages;
    this.variant = variant;
    this.buffer = Buffer.concat(frames);
    return this.buffer;
  }

  private sameAs(messages: readonly EncodedMessage[]): boolean {
    const previous = this.messages!;
    if (previous.length !== messages.length) return false;
    for (let i = 0; i < messages.length; i++) if (previous[i] !== messages[i]) return false;
    return true;
  }
}

let dirty: Flushable[] = [];
let scheduled = false;
/** Earliest time (performance.now()) the next flush may run. */
let notBefore = 0;
/**
 * After a flush that took d ms, the next waits min(gapFactor × d, MAX_GAP_MS).
 * Idle servers flush on the next turn; busy ones batch more per write. The cap
 * matters: a longer gap means a longer next flush, and once writing takes more
 * than half the time that feedback would diverge (seconds-long flushes,
 * gigabytes queued); beyond ~20 ms a batch saves little more anyway.
 */
let gapFactor = Number(process.env.PERSEID_FLUSH_GAP_FACTOR ?? 1);
const MAX_GAP_MS = 20;

/** Sets the flush gap factor (0 = flush every turn). */
export function setFlushGapFactor(factor: number): void {
  gapFactor = factor;
}

function flushAll(): void {
  scheduled = false;
  transportMetrics.flushes.inc();
  const started = performance.now();
  const batch = dirty;
  dirty = [];
  const cache = new BatchCache();
  for (let i = 0; i < batch.length; i++) {
    const target = batch[i]!;
    try {
      target.flush(cache);
    } catch (error) {
      target.failed(error);
    }
  }
  const ended = performance.now();
  notBefore = ended + Math.min(MAX_GAP_MS, gapFactor * (ended - started));
}

/** Asks for `target.flush` soon (see gapFactor); call once per batch per target. */
export function scheduleFlush(target: Flushable): void {
  dirty.push(target);
  if (scheduled) return;
  scheduled = true;
  const wait = notBefore - performance.now();
  if (wait < 1) setImmediate(flushAll);
  else setTimeout(flushAll, wait);
}
