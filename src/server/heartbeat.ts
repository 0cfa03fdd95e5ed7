/**
 * DDP heartbeats, Meteor's algorithm: every interval, if nothing was received
 * since the last check and no ping is outstanding, ping and wait `timeout` for
 * any message; silence past that closes the connection.
 */
export interface HeartbeatOptions {
  interval: number;
  timeout: number;
  sendPing(): void;
  onTimeout(): void;
}

export class Heartbeat {
  private seenPacket = false;
  private intervalTimer: NodeJS.Timeout | undefined;
  private timeoutTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: HeartbeatOptions) {}

  start(): void {
    if (this.options.interval <= 0) return;
    this.intervalTimer = setInterval(() => this.check(), this.options.interval);
  }

  stop(): void {
    clearInterval(this.intervalTimer);
    clearTimeout(this.timeoutTimer);
    this.intervalTimer = this.timeoutTimer = undefined;
  }

  /** Any message is proof of life. */
  messageReceived(): void {
    this.seenPacket = true;
    if (this.timeoutTimer) {
      clearTimeout(this.timeoutTimer);
      this.timeoutTimer = undefined;
    }
  }

  private check(): void {
    if (!this.seenPacket && !this.timeoutTimer) {
      this.options.sendPing();
      this.timeoutTimer = setTimeout(() => {
        this.stop();
        this.options.onTimeout();
      }, this.options.timeout);
    }
    this.seenPacket = false;
  }
}
