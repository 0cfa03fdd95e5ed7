/**
 * What a session has sent, for Meteor 3.5's session resumption: the count of
 * its messages (pings and pongs aside, as Meteor counts them), which
 * a reconnecting client compares with how many it received, and the last ones
 * sent, so that the messages the client missed (lost with the old socket, or
 * sent while it was away) can be sent again. While the client is connected only
 * a short tail is kept (by count and size); while it is away nothing is
 * dropped, and the session's cap ends the session instead.
 *
 * Every message of every session passes here, so a connected session's socket
 * hands over whole batches, the arrays it flushed, kept as they are: a message
 * then costs nothing here (recording each one, even as an array push, was a
 * tenth of S1's CPU, BENCHMARKS.md). The tail is trimmed a batch at a time.
 */
import type { EncodedMessage } from '../ddp/encoded.js';

/**
 * Messages recorded one at a time close a chunk at this many, or at half the
 * tail's size, so what is kept stays under twice the tail (a socket's batch is
 * a chunk as it comes).
 */
const CHUNK_MESSAGES = 64;

export class ResumeLog {
  /** Messages sent in the session so far (the counted ones). */
  count = 0;
  /**
   * Closed chunks, oldest first from `head` (those before it are dropped), each
   * as three entries: its messages, how many of them count, their characters.
   * One array, not three: a socket's flush lands here for every connection in
   * turn, and each array more is one more cold object to touch.
   */
  private chunks: Array<EncodedMessage[] | number | undefined> = [];
  /** Where the oldest kept chunk starts: trimming moves it on, and the array is compacted only now and then. */
  private head = 0;
  /** The chunk being filled one message at a time (while the client is away, or from SockJS). */
  private current: EncodedMessage[] = [];
  private currentCount = 0;
  private currentBytes = 0;
  /** The count of the first kept counted message. */
  private first = 0;
  /** Characters in the closed chunks. */
  private closedBytes = 0;
  private holding = false;
  /** `refs[0]`'s index (Infinity: none), so that trimming need not look at them. */
  private oldestRef = Infinity;
  /** Answers to requests: `m:<id>` for a method's result, `s:<id>` for a subscription's nosub, with their count, oldest first. */
  private refs: Array<{ ref: string; index: number }> = [];
  /** Messages and characters recorded since the client went away. */
  heldCount = 0;
  heldBytes = 0;

  constructor(
    /** How many recent messages to keep while the client is connected (at least, when sent; at most this and two chunks more). */
    private readonly keepMessages: number,
    /** And this many characters of them. */
    private readonly keepBytes: number,
  ) {}

  /** The session's `index`th counted message (0-based, perhaps not yet recorded) answers `ref`. */
  answers(ref: string, index: number): void {
    // The session's count only grows, so refs stay in order.
    if (this.refs.push({ ref, index }) === 1) this.oldestRef = index;
  }

  /** One message (while the client is away, or from a transport that writes messages one by one). */
  record(message: EncodedMessage): void {
    this.current.push(message);
    const size = message.text.length;
    const counted = message.uncounted ? 0 : 1;
    this.count += counted;
    this.currentCount += counted;
    this.currentBytes += size;
    if (this.holding) {
      this.heldCount += counted;
      this.heldBytes += size;
    }
    if (this.current.length >= CHUNK_MESSAGES || this.currentBytes * 2 >= this.keepBytes) this.closeChunk();
  }

  /** A batch the socket wrote (or dropped unwritten when it closed): kept as it is, never changed again by its sender. */
  recordBatch(messages: EncodedMessage[], chars: number): void {
    if (this.currentBytes > 0) this.closeChunk();
    let counted = messages.length;
    for (let i = 0; i < messages.length; i++) if (messages[i]!.uncounted) counted--;
    this.count += counted;
    if (this.holding) {
      this.heldCount += counted;
      this.heldBytes += chars;
    }
    this.addChunk(messages, counted, chars);
  }

  private closeChunk(): void {
    const chunk = this.current;
    this.current = [];
    const { currentCount, currentBytes } = this;
    this.currentCount = 0;
    this.currentBytes = 0;
    this.addChunk(chunk, currentCount, currentBytes);
  }

  private addChunk(messages: EncodedMessage[], counted: number, chars: number): void {
    this.chunks.push(messages, counted, chars);
    this.closedBytes += chars;
    if (!this.holding) this.trim();
  }

  /** Drops the oldest chunks while the rest still holds the tail asked for. */
  private trim(): void {
    const { chunks } = this;
    let head = this.head;
    let kept = this.count - this.first;
    let bytes = this.closedBytes + this.currentBytes;
    while (head < chunks.length) {
      const messages = chunks[head + 1] as number;
      const size = chunks[head + 2] as number;
      if (kept - messages < this.keepMessages && bytes - size < this.keepBytes) break;
      kept -= messages;
      bytes -= size;
      this.first += messages;
      this.closedBytes -= size;
      chunks[head] = undefined;
      head += 3;
    }
    if (head === this.head) return;
    this.head = head;
    // Compacted once 64 dropped chunks (3 entries each) make half the array.
    if (head >= 64 * 3 && head * 2 >= chunks.length) {
      chunks.splice(0, head);
      this.head = 0;
    }
    if (this.oldestRef < this.first) {
      this.refs = this.refs.filter((entry) => entry.index >= this.first);
      this.oldestRef = this.refs[0]?.index ?? Infinity;
    }
  }

  /** The client went away: keep everything from now on (the caller enforces the cap). */
  hold(): void {
    this.holding = true;
    this.heldCount = 0;
    this.heldBytes = 0;
  }

  /**
   * The client is back, having received `receivedCount` messages: keep only
   * the short tail again. What it missed is forgotten here, as it is about to
   * be sent again and so recorded again, after the resumed session's
   * `connected`, which takes the place of the first of them.
   */
  release(receivedCount: number): void {
    for (const entry of this.refs) if (entry.index >= receivedCount) entry.index++;
    const kept = this.counted().slice(0, receivedCount - this.first);
    this.chunks = [];
    this.head = 0;
    this.current = [];
    this.currentCount = 0;
    this.currentBytes = 0;
    this.closedBytes = 0;
    this.count = this.first;
    this.holding = false;
    this.heldCount = 0;
    this.heldBytes = 0;
    for (const message of kept) this.record(message);
    if (this.current.length > 0) this.closeChunk();
    this.trim();
  }

  /** The kept counted messages, oldest first. */
  private counted(): EncodedMessage[] {
    const closed: EncodedMessage[] = [];
    for (let i = this.head; i < this.chunks.length; i += 3) for (const message of this.chunks[i] as EncodedMessage[]) closed.push(message);
    return closed
      .concat(this.current)
      .filter((message) => !message.uncounted);
  }

  /** The messages a client that received `receivedCount` missed, or undefined when they are not all kept. */
  missedSince(receivedCount: number): EncodedMessage[] | undefined {
    if (!Number.isInteger(receivedCount) || receivedCount > this.count || receivedCount < this.first) return undefined;
    return this.counted().slice(receivedCount - this.first);
  }

  /** Whether a kept message carries `ref` (a method's result, a subscription's end). */
  mentions(ref: string): boolean {
    return this.refs.some((entry) => entry.ref === ref && entry.index >= this.first);
  }
}
