/**
 * Times when data messages are held back and then applied in one step
 * (Meteor's "quiescence"): after a reconnect to a new session, until every
 * subscription that was ready is ready again and every call sent on the new
 * connection is `updated`, so the old data stays on screen and the store then
 * switches over at once (`reset`); and while a `wait` call (a login) is in
 * flight, until its `updated`, so the page never shows half of what it changed.
 */
import type { NosubMessage, ReadyMessage, UpdatedMessage } from '../ddp/messages.js';
import type { DocumentMessage } from './documents.js';

/** Messages that change what the application sees, and so wait during quiescence. */
export type DataMessage = DocumentMessage | ReadyMessage | NosubMessage | UpdatedMessage;

export class Quiescence {
  private readonly subscriptions: Set<string>;
  private readonly methods: Set<string>;
  private readonly held: DataMessage[] = [];

  constructor(
    /** True after a reconnect to a new session: the held messages replace the store's contents. */
    readonly reset: boolean,
    subscriptionIds: Iterable<string>,
    methodIds: Iterable<string>,
  ) {
    this.subscriptions = new Set(subscriptionIds);
    this.methods = new Set(methodIds);
  }

  get complete(): boolean {
    return this.subscriptions.size === 0 && this.methods.size === 0;
  }

  /** The messages held so far, in arrival order. */
  get messages(): readonly DataMessage[] {
    return this.held;
  }

  hold(message: DataMessage): void {
    this.held.push(message);
    switch (message.msg) {
      case 'ready':
        for (const id of message.subs) this.subscriptions.delete(id);
        break;
      case 'nosub':
        this.subscriptions.delete(message.id);
        break;
      case 'updated':
        for (const id of message.methods) this.methods.delete(id);
        break;
    }
  }

  /** Also wait for this call's `updated` (a `wait` call sent meanwhile). */
  waitForMethod(id: string): void {
    this.methods.add(id);
  }

  /** Whether this subscription's `ready` is still awaited. */
  awaits(subscriptionId: string): boolean {
    return this.subscriptions.has(subscriptionId);
  }

  /** A subscription the application stopped is no longer waited for. */
  forgetSubscription(id: string): void {
    this.subscriptions.delete(id);
  }
}
