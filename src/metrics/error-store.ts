/**
 * Recent distinct errors (as Kadira and Monti list them): one entry per kind,
 * name and message, with its stack, how often it happened, when first and
 * last, and the trace of its latest occurrence. At most `cap` entries; the
 * one seen longest ago makes room.
 */
import { errorText } from './error-text.js';
import type { TraceRecord } from './trace.js';

export type ErrorKind = 'method' | 'sub' | 'server';

export interface ErrorRecord {
  kind: ErrorKind;
  /** The method or publication (or the server component) it happened in. */
  name: string;
  message: string;
  stack?: string;
  count: number;
  firstAt: number;
  lastAt: number;
  /** Whether the error was meant for the client (a DDPError), not a failure. */
  clientError: boolean;
  trace?: TraceRecord;
}

export class ErrorStore {
  private readonly entries = new Map<string, ErrorRecord>();

  constructor(private readonly cap = 50) {}

  add(kind: ErrorKind, name: string, error: unknown, clientError: boolean, trace?: TraceRecord): void {
    const { message, stack } = errorText(error);
    const key = `${kind}\u0000${name}\u0000${message}`;
    const now = Date.now();
    const held = this.entries.get(key);
    if (held) {
      held.count++;
      held.lastAt = now;
      if (stack) held.stack = stack;
      if (trace) held.trace = trace;
      // Most recent last, so the oldest is first to go.
      this.entries.delete(key);
      this.entries.set(key, held);
      return;
    }
    if (this.entries.size >= this.cap) this.entries.delete(this.entries.keys().next().value!);
    const record: ErrorRecord = { kind, name, message, count: 1, firstAt: now, lastAt: now, clientError };
    if (stack) record.stack = stack;
    if (trace) record.trace = trace;
    this.entries.set(key, record);
  }

  /** Most recently seen first. */
  recent(): ErrorRecord[] {
    return [...this.entries.values()].reverse();
  }

  clear(): void {
    this.entries.clear();
  }
}
