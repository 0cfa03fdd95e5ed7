/**
 * The fan-out seam: publish a message on a channel, receive the messages of the
 * channels subscribed. Implementations: `bus-memory.ts` (one process, tests)
 * and `bus-redis.ts` (Redis pub/sub, many servers).
 */
export interface FanoutBus {
  /** Sends `message` to the channel's subscribers; `onLost` is called if it could not be sent (the bus was down). */
  publish(channel: string, message: string, onLost?: () => void): void;
  /** Handles every message on `channel` until the returned function is called. */
  subscribe(channel: string, handler: (message: string) => void): () => void;
  /** Resolves once messages published on `channel` from now on will arrive. */
  whenSubscribed(channel: string): Promise<void>;
  /**
   * Called after the bus was down and is back: messages sent meanwhile are lost,
   * so whoever relies on them must re-read.
   */
  onReconnect(handler: () => void): void;
  close(): Promise<void>;
}

/** Subscriptions by channel, shared by the implementations. */
export class ChannelHandlers {
  private readonly handlers = new Map<string, Set<(message: string) => void>>();

  /** Adds a handler; true when it is the channel's first (the transport must subscribe). */
  add(channel: string, handler: (message: string) => void): boolean {
    let set = this.handlers.get(channel);
    const first = !set;
    if (!set) this.handlers.set(channel, (set = new Set()));
    set.add(handler);
    return first;
  }

  /** Removes a handler; true when it was the channel's last (the transport may unsubscribe). */
  remove(channel: string, handler: (message: string) => void): boolean {
    const set = this.handlers.get(channel);
    if (!set) return false;
    set.delete(handler);
    if (set.size > 0) return false;
    this.handlers.delete(channel);
    return true;
  }

  deliver(channel: string, message: string): void {
    for (const handler of this.handlers.get(channel) ?? []) handler(message);
  }

  channels(): string[] {
    return [...this.handlers.keys()];
  }
}
