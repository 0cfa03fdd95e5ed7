/**
 * Hands a connection's incoming messages on in order, at most `perTurn` in one
 * turn of the event loop. A SockJS frame or `xhr_send` body may pack 250,000
 * tiny messages into 1 MB; handled in one go, they held the event loop (and
 * every other connection) for seconds. The rest wait here, the transport stops
 * reading meanwhile where it can (`backlogged`), and they go on a slice per
 * turn; more than `maxWaiting` (HTTP bodies cannot be paused) is `overflow`.
 */
export interface MessagePacerOptions {
  /** Must not throw: the slices after the first run from the event loop. */
  deliver(text: string): void;
  /** True when messages start to wait here, false when the last has gone on. */
  backlogged(waiting: boolean): void;
  /** More than `maxWaiting` messages wait; they are dropped. */
  overflow(): void;
  maxWaiting: number;
  perTurn?: number;
}

export class MessagePacer {
  private backlog: string[] = [];
  private next = 0;
  private inTurn = 0;
  private readonly perTurn: number;

  constructor(private readonly options: MessagePacerOptions) {
    this.perTurn = options.perTurn ?? 1000;
  }

  /** Whether messages wait here (reading stays paused until they have gone on). */
  get waiting(): boolean {
    return this.backlog.length > 0;
  }

  push(text: string): void {
    if (this.backlog.length > 0) {
      if (this.backlog.length - this.next >= this.options.maxWaiting) {
        this.clear();
        this.options.overflow();
        return;
      }
      this.backlog.push(text);
      return;
    }
    if (this.inTurn++ === 0) queueMicrotask(() => (this.inTurn = 0));
    if (this.inTurn <= this.perTurn) {
      this.options.deliver(text);
      return;
    }
    this.backlog.push(text);
    this.options.backlogged(true);
    setImmediate(() => this.drain());
  }

  /** Drops what waits (the connection is gone). */
  clear(): void {
    this.backlog = [];
    this.next = 0;
  }

  private drain(): void {
    const { backlog } = this;
    if (backlog.length === 0) return;
    const end = Math.min(backlog.length, this.next + this.perTurn);
    while (this.next < end) {
      this.options.deliver(backlog[this.next++]!);
      if (this.backlog !== backlog) return; // cleared by that message's handling
    }
    if (this.next < backlog.length) {
      setImmediate(() => this.drain());
      return;
    }
    this.clear();
    this.options.backlogged(false);
  }
}
