/** Subscriptions the application holds; they outlive connections and are re-sent on each. */
import type { DDPError } from '../ddp/errors.js';
import { ClientErrors } from './client-errors.js';
import { Random } from '../ddp/random.js';
import { deferred, type Deferred } from './deferred.js';
import { ListenerSet } from './emitter.js';

export interface Subscription {
  readonly id: string;
  readonly name: string;
  readonly params: readonly unknown[];
  /**
   * Resolves when the server has sent the initial data (and it is in the store);
   * rejects if the subscription ends first, with the server's error if it sent one.
   */
  readonly ready: Promise<void>;
  readonly isReady: boolean;
  readonly isStopped: boolean;
  /** Ends the subscription (sends `unsub`); the server then removes its documents. */
  stop(): void;
  /**
   * Called once when the subscription ends: after {@link stop} without an error,
   * or when the server ends it (`nosub`), with its error if any. Called at once if
   * it already ended. Returns a function that removes the listener.
   */
  onStop(listener: (error?: DDPError) => void): () => void;
}

class ClientSubscription implements Subscription {
  readonly ready: Promise<void>;
  isReady = false;
  isStopped = false;
  private readonly readiness: Deferred<void> = deferred(true);
  private readonly stopListeners = new ListenerSet<[error?: DDPError]>();
  private stopError: DDPError | undefined;

  constructor(
    readonly id: string,
    readonly name: string,
    readonly params: readonly unknown[],
    private readonly stopRequested: (subscription: ClientSubscription) => void,
  ) {
    this.ready = this.readiness.promise;
  }

  stop(): void {
    if (this.isStopped) return;
    this.stopRequested(this);
    this.end();
  }

  onStop(listener: (error?: DDPError) => void): () => void {
    if (!this.isStopped) return this.stopListeners.add(listener);
    listener(this.stopError);
    return () => undefined;
  }

  markReady(): void {
    if (this.isReady || this.isStopped) return;
    this.isReady = true;
    this.readiness.resolve();
  }

  end(error?: DDPError): void {
    if (this.isStopped) return;
    this.isStopped = true;
    this.stopError = error;
    if (!this.isReady) {
      this.readiness.reject(
        error ?? ClientErrors.subscriptionStopped({ name: this.name }),
      );
    }
    this.stopListeners.notify(error);
    this.stopListeners.clear();
  }
}

export class SubscriptionRegistry {
  private readonly subscriptions = new Map<string, ClientSubscription>();

  /** `stopped` learns of subscriptions the application stops, to tell the server. */
  constructor(private readonly stopped: (subscription: Subscription) => void) {}

  create(name: string, params: readonly unknown[]): Subscription {
    // Random ids as Meteor's client uses: they must not repeat across reconnects.
    const subscription = new ClientSubscription(Random.id(), name, params, (sub) => {
      this.subscriptions.delete(sub.id);
      this.stopped(sub);
    });
    this.subscriptions.set(subscription.id, subscription);
    return subscription;
  }

  all(): IterableIterator<Subscription> {
    return this.subscriptions.values();
  }

  readyIds(): string[] {
    return [...this.subscriptions.values()].filter((sub) => sub.isReady).map((sub) => sub.id);
  }

  ready(ids: readonly string[]): void {
    for (const id of ids) this.subscriptions.get(id)?.markReady();
  }

  /** The server ended a subscription; unknown ids (already stopped here) are ignored. */
  nosub(id: string, error?: DDPError): void {
    const subscription = this.subscriptions.get(id);
    if (!subscription) return;
    this.subscriptions.delete(id);
    subscription.end(error);
  }
}
