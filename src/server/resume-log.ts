/**
 * What a session has sent, for Meteor 3.5's session resumption: the count of
 * its messages (pings and pongs aside), which a reconnecting client compares
 * with how many it received, and the last ones sent, so that the messages the
 * client missed (lost with the old socket, or sent while it was away) can be
 * sent again. While the client is connected only a short tail is kept (by
 * count and size); while it is away nothing is dropped, and the session's cap
 * ends the session instead.
 */
import type { EncodedMessage } from '../ddp/encoded.js';

interface Entry {
  readonly message: EncodedMessage;
  /** `m:<id>` for a method's result, `s:<id>` for a subscription's nosub: what a repeated request is checked against. */
  readonly ref: string | undefined;
}

export class ResumeLog {
  /** Messages sent in the session so far. */
  count = 0;
  private entries: Entry[] = [];
  private bytes = 0;
  private holding = false;
  /** Messages and characters recorded since the client went away. */
  heldCount = 0;
  heldBytes = 0;

  constructor(
    /** How many recent messages to keep while the client is connected. */
    private readonly keepMessages: number,
    /** And at most this many characters of them. */
    private readonly keepBytes: number,
  ) {}

  record(message: EncodedMessage, ref?: string): void {
    this.count++;
    this.entries.push({ message, ref });
    const size = message.text.length;
    this.bytes += size;
    if (this.holding) {
      this.heldCount++;
      this.heldBytes += size;
      return;
    }
    let drop = 0;
    while (this.entries.length - drop > this.keepMessages || (this.bytes > this.keepBytes && drop < this.entries.length)) {
      this.bytes -= this.entries[drop]!.message.text.length;
      drop++;
    }
    if (drop > 0) this.entries = this.entries.slice(drop);
  }

  /** The client went away: keep everything from now on (the caller enforces the cap). */
  hold(): void {
    this.holding = true;
    this.heldCount = 0;
    this.heldBytes = 0;
  }

  /** The client is back: keep only the short tail again. */
  release(): void {
    this.holding = false;
    this.heldCount = 0;
    this.heldBytes = 0;
  }

  /** The messages a client that received `receivedCount` missed, or undefined when they are not all kept. */
  missedSince(receivedCount: number): EncodedMessage[] | undefined {
    const missed = this.count - receivedCount;
    if (!Number.isInteger(receivedCount) || missed < 0 || missed > this.entries.length) return undefined;
    return this.entries.slice(this.entries.length - missed).map((entry) => entry.message);
  }

  /** Whether a kept message carries `ref` (a method's result, a subscription's end). */
  mentions(ref: string): boolean {
    return this.entries.some((entry) => entry.ref === ref);
  }
}
