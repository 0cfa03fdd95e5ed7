/**
 * What a session has sent, for Meteor 3.5's session resumption: the count of
 * its messages (pings and pongs aside), which a reconnecting client compares
 * with how many it received, and the last ones sent, so that the messages the
 * client missed (lost with the old socket, or sent while it was away) can be
 * sent again. While the client is connected only a short tail is kept (by
 * count and size); while it is away nothing is dropped, and the session's cap
 * ends the session instead.
 *
 * Every message of every session passes here, so recording one is an array
 * push: messages go into chunks, and the tail is trimmed a whole chunk at a
 * time (re-slicing the tail for each message doubled S1's CPU per message).
 */
import type { EncodedMessage } from '../ddp/encoded.js';

/** Messages per chunk; a chunk also closes at half the tail's size, so what is kept stays under twice the tail. */
const CHUNK_MESSAGES = 64;

export class ResumeLog {
  /** Messages sent in the session so far. */
  count = 0;
  /** Kept messages, oldest chunk first; the last one is being filled. */
  private chunks: EncodedMessage[][] = [];
  private chunkBytes: number[] = [];
  private current: EncodedMessage[] = [];
  private currentBytes = 0;
  /** The count of the first kept message. */
  private first = 0;
  /** Characters in the closed chunks. */
  private closedBytes = 0;
  /** Kept messages that answer a request: `m:<id>` for a method's result, `s:<id>` for a subscription's nosub, with their count. */
  private refs: Array<{ ref: string; index: number }> = [];
  private holding = false;
  /** Messages and characters recorded since the client went away. */
  heldCount = 0;
  heldBytes = 0;

  constructor(
    /** How many recent messages to keep while the client is connected (at least, when sent; at most this and two chunks more). */
    private readonly keepMessages: number,
    /** And this many characters of them. */
    private readonly keepBytes: number,
  ) {}

  record(message: EncodedMessage, ref?: string): void {
    if (ref !== undefined) this.refs.push({ ref, index: this.count });
    this.count++;
    this.current.push(message);
    const size = message.text.length;
    this.currentBytes += size;
    if (this.holding) {
      this.heldCount++;
      this.heldBytes += size;
    }
    if (this.current.length >= CHUNK_MESSAGES || this.currentBytes * 2 >= this.keepBytes) this.closeChunk();
  }

  private closeChunk(): void {
    this.chunks.push(this.current);
    this.chunkBytes.push(this.currentBytes);
    this.closedBytes += this.currentBytes;
    this.current = [];
    this.currentBytes = 0;
    if (!this.holding) this.trim();
  }

  /** Drops the oldest chunks while the rest still holds the tail asked for. */
  private trim(): void {
    let drop = 0;
    let kept = this.count - this.first;
    let bytes = this.closedBytes + this.currentBytes;
    while (drop < this.chunks.length) {
      const messages = this.chunks[drop]!.length;
      const size = this.chunkBytes[drop]!;
      if (kept - messages < this.keepMessages && bytes - size < this.keepBytes) break;
      kept -= messages;
      bytes -= size;
      this.first += messages;
      this.closedBytes -= size;
      drop++;
    }
    if (drop === 0) return;
    this.chunks.splice(0, drop);
    this.chunkBytes.splice(0, drop);
    if (this.refs.length > 0 && this.refs[0]!.index < this.first) this.refs = this.refs.filter((entry) => entry.index >= this.first);
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
    this.trim();
  }

  /** The messages a client that received `receivedCount` missed, or undefined when they are not all kept. */
  missedSince(receivedCount: number): EncodedMessage[] | undefined {
    if (!Number.isInteger(receivedCount) || receivedCount > this.count || receivedCount < this.first) return undefined;
    return this.chunks.flat().concat(this.current).slice(receivedCount - this.first);
  }

  /** Whether a kept message carries `ref` (a method's result, a subscription's end). */
  mentions(ref: string): boolean {
    return this.refs.some((entry) => entry.ref === ref && entry.index >= this.first);
  }
}
