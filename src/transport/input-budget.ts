/**
 * The server's budget of incoming bytes held for clients: of messages that have
 * not fully arrived (`ws` keeps a frame's, or a fragmented message's, pieces
 * until the last one) and of messages waiting in a session's queue. Each
 * connection is capped on its own, but a thousand connections per address each
 * sending most of a 1 MB message and never the rest held a gigabyte. Past the
 * budget, the connections holding the most are dropped, biggest first, until
 * the rest fit in nine tenths of it.
 */
import type { Logger } from '../log.js';
import { transportMetrics } from './transport-metrics.js';

export interface InputHolder {
  /** Bytes it holds now (of a message not yet complete, or of messages waiting to run). */
  readonly heldBytes: number;
  /** Closed for holding too much of the budget. */
  dropOverInputBudget(): void;
}

export class InputBudget {
  private readonly holders = new Set<InputHolder>();
  private total = 0;
  private shedding = false;

  constructor(
    readonly limit: number,
    private readonly log: Logger,
  ) {}

  /** `holder`'s bytes changed by `delta` (its `heldBytes` is already the new figure). */
  adjust(holder: InputHolder, delta: number): void {
    this.total += delta;
    if (holder.heldBytes > 0) this.holders.add(holder);
    else this.holders.delete(holder);
    if (this.total > this.limit && !this.shedding) this.shed();
  }

  private shed(): void {
    const biggestFirst = [...this.holders].sort((a, b) => b.heldBytes - a.heldBytes);
    const target = 0.9 * this.limit;
    this.log.warn('dropping clients: the server holds too many incoming bytes', { total: this.total, budget: this.limit });
    this.shedding = true;
    try {
      for (const holder of biggestFirst) {
        if (this.total <= target) break;
        transportMetrics.inputBudgetDrops.inc();
        // Its close gives its bytes back through adjust.
        holder.dropOverInputBudget();
      }
    } finally {
      this.shedding = false;
    }
  }
}
