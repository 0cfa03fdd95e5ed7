/**
 * Refusals of something a client keeps asking for (connections past a limit,
 * subscriptions past the server's bound), logged at most once a minute with
 * how many there were since the last line: a refused script retries fast, and
 * a line per refusal would flood the log.
 */
import type { Logger } from './log.js';

const EVERY_MS = 60_000;

export class RefusalLog {
  private refused = 0;
  private lastWarning = -Infinity;

  constructor(
    private readonly log: Logger,
    /** The line: what is refused, and what to do about it. */
    private readonly message: string,
    /** The name of the count's field. */
    private readonly counted = 'refused',
  ) {}

  /** Counts a refusal; warns with `fields` and the count when the last warning is a minute old. */
  refusedOne(fields: Record<string, unknown>): void {
    this.refused++;
    const now = performance.now();
    if (now - this.lastWarning < EVERY_MS) return;
    this.log.warn(this.message, { ...fields, [this.counted]: this.refused });
    this.refused = 0;
    this.lastWarning = now;
  }
}
