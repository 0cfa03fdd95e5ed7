/**
 * Outstanding method calls. A call settles only once both its `result` and an
 * `updated` naming it have arrived, in either order: then its writes are visible
 * in the local store (Meteor's contract, DDP notes §1.5).
 */
import { DDPError } from '../ddp/errors.js';
import type { MethodMessage, ResultMessage } from '../ddp/messages.js';
import { deferred, type Deferred } from './deferred.js';

export interface MethodOptions {
  /**
   * Seed of the method's random stream (Meteor's `randomSeed`): ids the server
   * generates from it can be predicted, e.g. the first insert into `tasks` gets
   * `collectionIdSequence(new RandomStream(seed), 'tasks').id()`.
   */
  randomSeed?: string;
  /**
   * Do not re-send the call after a reconnect when its outcome is unknown; reject
   * it instead (for calls that must not run twice).
   */
  noRetry?: boolean;
}

type Outcome = { result: unknown } | { error: DDPError };

interface Invocation {
  readonly message: MethodMessage;
  readonly noRetry: boolean;
  readonly settle: Deferred<unknown>;
  /** Sent on the current connection (false again once that connection is lost). */
  sent: boolean;
  outcome?: Outcome;
  updated: boolean;
}

function settle(invocation: Invocation, outcome: Outcome): void {
  if ('error' in outcome) invocation.settle.reject(outcome.error);
  else invocation.settle.resolve(outcome.result);
}

export class MethodTracker {
  private nextId = 1;
  /** In call order, which is the order re-sent calls must keep. */
  private readonly invocations = new Map<string, Invocation>();

  create(
    method: string,
    params: unknown[],
    options: MethodOptions,
  ): { message: MethodMessage; promise: Promise<unknown> } {
    const message: MethodMessage = { msg: 'method', id: String(this.nextId++), method, params };
    if (options.randomSeed !== undefined) message.randomSeed = options.randomSeed;
    const noRetry = options.noRetry ?? false;
    const invocation: Invocation = { message, noRetry, settle: deferred(), sent: false, updated: false };
    this.invocations.set(message.id, invocation);
    return { message, promise: invocation.settle.promise };
  }

  markSent(id: string): void {
    const invocation = this.invocations.get(id);
    if (invocation) invocation.sent = true;
  }

  /** Calls that still have to be sent on this connection: new ones and those whose outcome was lost. */
  unsent(): MethodMessage[] {
    const messages: MethodMessage[] = [];
    for (const invocation of this.invocations.values()) {
      if (!invocation.sent && !invocation.outcome) messages.push(invocation.message);
    }
    return messages;
  }

  result(message: ResultMessage): void {
    const invocation = this.invocations.get(message.id);
    if (!invocation || invocation.outcome) return;
    invocation.outcome = message.error ? { error: DDPError.fromJSON(message.error) } : { result: message.result };
    this.settleIfDone(invocation);
  }

  updated(ids: readonly string[]): void {
    for (const id of ids) {
      const invocation = this.invocations.get(id);
      if (!invocation) continue;
      invocation.updated = true;
      this.settleIfDone(invocation);
    }
  }

  /**
   * The connection dropped. Calls without a result will be re-sent (an `updated`
   * they got no longer counts), except `noRetry` ones, which fail. Calls with a
   * result wait for {@link settleOrphans}.
   */
  connectionLost(): void {
    for (const [id, invocation] of this.invocations) {
      if (!invocation.outcome && invocation.sent && invocation.noRetry) {
        this.invocations.delete(id);
        invocation.settle.reject(
          new DDPError(
            'invocation-failed',
            `Method '${invocation.message.method}' might not have run: the connection dropped and noRetry is set`,
          ),
        );
        continue;
      }
      if (!invocation.outcome) invocation.updated = false;
      invocation.sent = false;
    }
  }

  /**
   * Calls that got their result but whose `updated` was lost with the old
   * connection settle once the store has switched to the new session's data:
   * the closest the client gets to "the writes are visible".
   */
  settleOrphans(): void {
    for (const [id, invocation] of this.invocations) {
      if (!invocation.outcome || invocation.sent) continue;
      this.invocations.delete(id);
      settle(invocation, invocation.outcome);
    }
  }

  failAll(error: DDPError): void {
    const invocations = [...this.invocations.values()];
    this.invocations.clear();
    for (const invocation of invocations) invocation.settle.reject(error);
  }

  private settleIfDone(invocation: Invocation): void {
    if (!invocation.outcome || !invocation.updated) return;
    this.invocations.delete(invocation.message.id);
    settle(invocation, invocation.outcome);
  }
}
