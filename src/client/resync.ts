/**
 * What happens between a reconnect and the moment the client trusts the new
 * session's data (Meteor's "quiescence"). The server re-sends the documents of
 * every re-sent subscription; anything it does not re-send is gone. Until every
 * subscription that was ready has become ready again, and every method sent on
 * the new connection is `updated`, data messages are held back so that the old
 * data stays visible; then the store switches over in one step.
 */
import type { NosubMessage, ReadyMessage, UpdatedMessage } from '../ddp/messages.js';
import type { DocumentMessage } from './documents.js';

/** Messages that change what the application sees, and so wait during a resync. */
export type DataMessage = DocumentMessage | ReadyMessage | NosubMessage | UpdatedMessage;

export class Resync {
  private readonly subscriptions: Set<string>;
  private readonly methods: Set<string>;
  private readonly held: DataMessage[] = [];

  constructor(subscriptionIds: Iterable<string>, methodIds: Iterable<string>) {
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

  /** A subscription the application stopped is no longer waited for. */
  forgetSubscription(id: string): void {
    this.subscriptions.delete(id);
  }
}
