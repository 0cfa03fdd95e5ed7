/**
 * A failure that repeats (a round, an announcement, a connection retried on a
 * timer) logged once per change of state instead of once per attempt: a
 * warning when it starts failing or fails for another reason, a line when it
 * works again. Each repeat goes to the debug level.
 */
import type { Logger } from './log.js';

/** An error as one line: its message, else its code (Node's AggregateError of a refused connection has no message). */
export function reasonOf(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  return error.message || (error as { code?: string }).code || error.name;
}

export class FailureLog {
  private reason: string | undefined;
  private failures = 0;
  private since = 0;

  constructor(
    private readonly log: Logger,
    /** What fails, as the start of the lines: `autoscale round`, `discovery update`. */
    private readonly what: string,
    private readonly fields: Record<string, unknown> = {},
  ) {}

  failed(error: unknown): void {
    const reason = reasonOf(error);
    if (this.failures++ === 0) this.since = Date.now();
    if (reason === this.reason) {
      this.log.debug(`${this.what} failed again`, { ...this.fields, error: reason, failures: this.failures });
      return;
    }
    this.reason = reason;
    this.log.warn(`${this.what} failed; retrying`, { ...this.fields, error: reason });
  }

  succeeded(): void {
    if (this.failures === 0) return;
    this.log.info(`${this.what} works again`, { ...this.fields, failures: this.failures, afterS: Math.round((Date.now() - this.since) / 1000) });
    this.failures = 0;
    this.reason = undefined;
  }
}
