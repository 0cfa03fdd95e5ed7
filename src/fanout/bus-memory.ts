/**
 * The fan-out bus inside one process: for a single server and for tests. Across
 * servers use `bus-redis.ts`.
 */
import { ChannelHandlers, type FanoutBus } from './bus.js';

/** Every subscriber in this process gets every message, in a microtask after publish returns (as if it had travelled). */
export class MemoryBus implements FanoutBus {
  private readonly handlers = new ChannelHandlers();

  publish(channel: string, message: string): void {
    queueMicrotask(() => this.handlers.deliver(channel, message));
  }

  subscribe(channel: string, handler: (message: string) => void): () => void {
    this.handlers.add(channel, handler);
    return () => void this.handlers.remove(channel, handler);
  }

  whenSubscribed(): Promise<void> {
    return Promise.resolve();
  }

  onReconnect(): void {
    // An in-process bus is never down.
  }

  async close(): Promise<void> {}
}
