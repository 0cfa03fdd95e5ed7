/**
 * The server's budget of unsent output, summed over every connection. Each
 * connection is capped on its own (maxBufferedBytes), but many connections
 * each under their cap can still hold more memory than the process has; past
 * the budget, the connections holding the most are held back first (their
 * sessions serve no more of their messages, so they make no more replies),
 * and those still holding the excess after a grace period are dropped,
 * biggest first. Far past the budget (twice over) the biggest go at once.
 */
import type { Logger } from '../log.js';
import { transportMetrics } from './transport-metrics.js';

export interface BudgetMember {
  /** Bytes queued for this client and not yet handed to the kernel. */
  readonly bufferedBytes: number;
  /** Held back (true) or let go (false). */
  hold(on: boolean): void;
  /** Closed for holding too much of the budget for too long. */
  dropOverBudget(): void;
}

/** How long a held connection may keep its share of the excess before it is dropped. */
const GRACE_MS = 2000;
/** While anything is held, look again this often (held clients may have read meanwhile). */
const RECHECK_MS = 100;

export class OutputBudget {
  private readonly members = new Set<BudgetMember>();
  private readonly heldSince = new Map<BudgetMember, number>();
  private scheduled = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    readonly limit: number,
    private readonly log: Logger,
  ) {}

  add(member: BudgetMember): void {
    this.members.add(member);
  }

  delete(member: BudgetMember): void {
    this.members.delete(member);
    this.heldSince.delete(member);
  }

  /** Output was queued or written somewhere: check the budget once this turn is over. */
  changed(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.check();
    });
  }

  /** The unsent bytes of every connection now. */
  total(): number {
    let total = 0;
    for (const member of this.members) total += member.bufferedBytes;
    return total;
  }

  check(now = Date.now()): void {
    let total = this.total();
    transportMetrics.bufferedBytes.set(total);
    if (total <= this.limit) {
      for (const member of this.heldSince.keys()) member.hold(false);
      this.heldSince.clear();
      this.stopTimer();
      return;
    }
    const biggestFirst = [...this.members].map((m) => ({ member: m, bytes: m.bufferedBytes })).sort((a, b) => b.bytes - a.bytes);
    const offenders = new Set<BudgetMember>();
    let covered = 0;
    for (const { member, bytes } of biggestFirst) {
      if (total <= this.limit || covered >= total - this.limit) break;
      const since = this.heldSince.get(member);
      if (since !== undefined && (now - since >= GRACE_MS || total > 2 * this.limit)) {
        this.log.warn('dropping a client: the server holds too much unsent output', { buffered: bytes, total, budget: this.limit });
        transportMetrics.budgetDrops.inc();
        this.delete(member);
        member.dropOverBudget();
        total -= bytes;
        continue;
      }
      if (since === undefined) {
        this.heldSince.set(member, now);
        transportMetrics.budgetHolds.inc();
        member.hold(true);
      }
      offenders.add(member);
      covered += bytes;
    }
    // Connections held earlier that are no longer among the biggest go back to normal.
    for (const member of [...this.heldSince.keys()]) {
      if (!offenders.has(member)) {
        this.heldSince.delete(member);
        member.hold(false);
      }
    }
    transportMetrics.bufferedBytes.set(total);
    if (this.heldSince.size > 0) this.startTimer();
    else this.stopTimer();
  }

  close(): void {
    this.stopTimer();
    this.members.clear();
    this.heldSince.clear();
  }

  private startTimer(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.check(), RECHECK_MS);
    this.timer.unref();
  }

  private stopTimer(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
