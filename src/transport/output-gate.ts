/**
 * Whether a connection may be given more output: not while its client has a
 * high-water mark of output unread, nor while the server's output budget holds
 * it back. The session asks before it builds a method's reply or a
 * subscription's initial data, and waits (bounded) when the gate is shut, so a
 * client that does not read stops costing memory instead of piling it up.
 */

export type GateOutcome = 'writable' | 'closed' | 'timeout';

export class OutputGate {
  private held = false;
  private closed = false;
  private waiters: Array<(outcome: GateOutcome) => void> = [];
  private pollTimer: NodeJS.Timeout | undefined;

  /**
   * @param buffered the connection's unsent bytes now
   * @param highWater the gate shuts at this many
   * @param pollMs for transports with no drain event (SockJS polling): how often to look again while someone waits
   */
  constructor(
    private readonly buffered: () => number,
    private readonly highWater: number,
    private readonly pollMs?: number,
  ) {}

  get open(): boolean {
    return !this.closed && !this.held && this.buffered() < this.highWater;
  }

  /** Resolves once the gate is open, or the connection closes, or after `timeoutMs`: which of them. */
  wait(timeoutMs: number): Promise<GateOutcome> {
    if (this.closed) return Promise.resolve('closed');
    if (this.open) return Promise.resolve('writable');
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== settle);
        this.stopPolling();
        resolve('timeout');
      }, timeoutMs);
      const settle = (outcome: GateOutcome) => {
        clearTimeout(timer);
        resolve(outcome);
      };
      this.waiters.push(settle);
      if (this.pollMs !== undefined && !this.pollTimer) this.pollTimer = setInterval(() => this.recheck(), this.pollMs);
    });
  }

  /** Held back by the server's output budget (true) or let go (false). */
  hold(on: boolean): void {
    this.held = on;
    if (!on) this.recheck();
  }

  get isHeld(): boolean {
    return this.held;
  }

  /** Call when output drained: wakes the waiters if the gate is open now. */
  recheck(): void {
    if (this.waiters.length === 0 || !this.open) return;
    this.settleAll('writable');
  }

  close(): void {
    this.closed = true;
    this.settleAll('closed');
  }

  private settleAll(outcome: GateOutcome): void {
    const waiters = this.waiters;
    this.waiters = [];
    this.stopPolling();
    for (const settle of waiters) settle(outcome);
  }

  private stopPolling(): void {
    if (this.pollTimer && this.waiters.length === 0) {
      clearInterval(this.pollTimer);
      this.pollTimer = undefined;
    }
  }
}
