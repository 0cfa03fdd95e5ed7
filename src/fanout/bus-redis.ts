/**
 * Redis pub/sub as the fan-out bus (ioredis): one connection publishes, one
 * subscribes, channels are subscribed on first use and dropped after last use.
 * ioredis reconnects by itself; after a reconnect the handlers of onReconnect
 * run, since what was published while the connection was down is gone. Both
 * connections are pinged every CHECK_MS, so one that Redis stopped answering
 * without closing it is replaced within UNANSWERED_MS, as if it had dropped.
 */
import { Redis } from 'ioredis';
import type { Logger } from '../log.js';
import { UNANSWERED_MS } from '../redis-client.js';
import { ChannelHandlers, type FanoutBus } from './bus.js';
import { fanoutMetrics } from './fanout-metrics.js';

/** How often each connection is asked for an answer: a subscriber only listens, and would never notice silence. */
const CHECK_MS = 2000;

export class RedisBus implements FanoutBus {
  private readonly publisher: Redis;
  private readonly subscriber: Redis;
  private readonly handlers = new ChannelHandlers();
  private readonly reconnectHandlers: Array<() => void> = [];
  /** SUBSCRIBE commands sent and not yet confirmed, by channel. */
  private readonly subscribing = new Map<string, Promise<void>>();
  /** The connections lost and not back yet: the log says when the first goes and when the last is back. */
  private readonly down = new Set<Redis>();
  private readonly checks: NodeJS.Timeout;

  constructor(
    url: string,
    private readonly log: Logger,
  ) {
    const options = { maxRetriesPerRequest: null, socketTimeout: UNANSWERED_MS, retryStrategy: (attempt: number) => Math.min(2000, 50 * 2 ** attempt) };
    // While Redis is down, publishing fails at once instead of queueing without bound: the
    // resync after the reconnect covers what was not sent. Subscribing queues (it must happen).
    this.publisher = new Redis(url, { ...options, enableOfflineQueue: false });
    this.subscriber = new Redis(url, options);
    this.subscriber.on('message', (channel: string, message: string) => {
      fanoutMetrics.received.inc();
      this.handlers.deliver(channel, message);
    });
    for (const connection of [this.publisher, this.subscriber]) {
      connection.on('error', (error: Error) => log.debug('redis connection error', { error: error.message }));
      connection.on('close', () => {
        if (this.down.size === 0) log.warn('redis connection lost; reconnecting');
        this.down.add(connection);
      });
      connection.on('ready', () => {
        if (!this.down.delete(connection)) return;
        if (this.down.size === 0) log.info('redis reachable again');
        // The subscriber resubscribes on reconnect (ioredis does); then the gap is reported.
        if (connection === this.subscriber) for (const handler of this.reconnectHandlers) handler();
      });
    }
    this.checks = setInterval(() => {
      for (const connection of [this.publisher, this.subscriber]) if (connection.status === 'ready') connection.ping().catch(() => undefined);
    }, CHECK_MS);
    this.checks.unref();
  }

  /** Resolves once both connections are up (startup waits for it). */
  async ready(): Promise<void> {
    await Promise.all(
      [this.publisher, this.subscriber].map((connection) =>
        connection.status === 'ready' ? undefined : new Promise<void>((resolve) => connection.once('ready', () => resolve())),
      ),
    );
  }

  publish(channel: string, message: string, onLost?: () => void): void {
    fanoutMetrics.published.inc();
    this.publisher.publish(channel, message).catch((error: Error) => {
      this.log.debug('redis publish failed', { channel, error: error.message });
      onLost?.();
    });
  }

  subscribe(channel: string, handler: (message: string) => void): () => void {
    if (this.handlers.add(channel, handler)) {
      const done = this.subscriber
        .subscribe(channel)
        .then(() => undefined)
        .catch((error: Error) => this.log.warn('redis subscribe failed', { channel, error: error.message }))
        .finally(() => {
          if (this.subscribing.get(channel) === done) this.subscribing.delete(channel);
        });
      this.subscribing.set(channel, done);
    }
    return () => {
      if (this.handlers.remove(channel, handler)) void this.subscriber.unsubscribe(channel).catch(() => undefined);
    };
  }

  whenSubscribed(channel: string): Promise<void> {
    return this.subscribing.get(channel) ?? Promise.resolve();
  }

  onReconnect(handler: () => void): void {
    this.reconnectHandlers.push(handler);
  }

  /** The connection for other Redis work (discovery, relay election). */
  get commands(): Redis {
    return this.publisher;
  }

  async close(): Promise<void> {
    clearInterval(this.checks);
    this.publisher.disconnect();
    this.subscriber.disconnect();
  }
}
