/**
 * Client-side liveness check (DDP notes §1.3): after `interval` ms without any
 * inbound message, send a ping; if nothing at all arrives within `timeout` ms
 * after it, the connection is presumed dead. Every inbound message counts.
 *
 * Inbound messages only record a timestamp (no timer churn per message); the
 * single timer re-arms itself for the remaining idle time when it fires early.
 */
export class Heartbeat {
  private lastReceived = performance.now();
  private awaitingAnswer = false;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly interval: number,
    private readonly timeout: number,
    private readonly sendPing: () => void,
    private readonly onTimeout: () => void,
  ) {
    this.arm(interval);
  }

  messageReceived(): void {
    this.lastReceived = performance.now();
    if (this.awaitingAnswer) {
      this.awaitingAnswer = false;
      this.arm(this.interval);
    }
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(delay: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.check(), delay);
  }

  private check(): void {
    const idle = performance.now() - this.lastReceived;
    if (idle < this.interval) {
      this.arm(this.interval - idle);
      return;
    }
    this.awaitingAnswer = true;
    this.sendPing();
    clearTimeout(this.timer);
    this.timer = setTimeout(this.onTimeout, this.timeout);
  }
}
