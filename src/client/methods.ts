/**
 * Outstanding method calls, in Meteor's blocks: calls go out in call order;
 * a `wait` call waits for every earlier call to finish and holds every later
 * one until it has finished itself. A call finishes once both its `result`
 * and its `updated` (with the server's data on screen) have arrived, in
 * either order (Meteor's contract, DDP notes §1.5).
 */
import { DDPError } from '../ddp/errors.js';
import type { MethodMessage, ResultMessage } from '../ddp/messages.js';
import { ClientErrors } from './client-errors.js';
import { deferred, type Deferred } from './deferred.js';
import { callSafely } from './emitter.js';

export interface MethodOptions {
  /**
   * Seed of the method's random stream (Meteor's `randomSeed`): ids the server
   * generates from it can be predicted, e.g. the first insert into `tasks` gets
   * `collectionIdSequence(new RandomStream(seed), 'tasks').id()`. A stub that
   * draws random values makes one itself.
   */
  randomSeed?: string;
  /**
   * Do not re-send the call after a reconnect when its outcome is unknown; reject
   * it instead (for calls that must not run twice).
   */
  noRetry?: boolean;
  /** Send only after every earlier call has finished, and hold later calls until this one has. */
  wait?: boolean;
  /** If the stub throws, reject the call with that error and do not send it (default: report it and send). */
  throwStubExceptions?: boolean;
  /**
   * Called as soon as the server's result or error arrives, before the
   * method's writes are necessarily on screen (Meteor's option of this name);
   * the call's promise settles once they are.
   */
  onResultReceived?: (error: DDPError | undefined, result?: unknown) => void;
}

type Outcome = { result: unknown } | { error: DDPError };

interface Invocation {
  readonly message: MethodMessage;
  readonly options: MethodOptions;
  readonly noRetry: boolean;
  readonly wait: boolean;
  readonly settle: Deferred<unknown>;
  /** Sent on the current connection (false again once that connection is lost). */
  sent: boolean;
  outcome?: Outcome;
  /** Its `updated` arrived (on this session). */
  updated: boolean;
  /** Its `updated` arrived and the server's data it wrote is on screen. */
  dataVisible: boolean;
  finished: boolean;
}

interface Block {
  readonly wait: boolean;
  readonly calls: Invocation[];
}

export class MethodTracker {
  private nextId = 1;
  private readonly invocations = new Map<string, Invocation>();
  /** The first block is in flight; the others wait for it. */
  private blocks: Block[] = [];
  private idleCallbacks: Array<() => void> = [];

  /** The id the next call gets (its stub runs before the call is added). */
  reserveId(): string {
    return String(this.nextId++);
  }

  add(message: MethodMessage, options: MethodOptions): Promise<unknown> {
    const wait = options.wait ?? false;
    const invocation: Invocation = {
      message,
      options,
      noRetry: options.noRetry ?? false,
      wait,
      settle: deferred(),
      sent: false,
      updated: false,
      dataVisible: false,
      finished: false,
    };
    this.invocations.set(message.id, invocation);
    const last = this.blocks.at(-1);
    if (wait || !last || last.wait) this.blocks.push({ wait, calls: [invocation] });
    else last.calls.push(invocation);
    return invocation.settle.promise;
  }

  /** Calls to send now: those of the block in flight not yet sent on this connection. */
  sendable(): MethodMessage[] {
    const [first] = this.blocks;
    if (!first) return [];
    return first.calls.filter((call) => !call.sent && !call.outcome && !call.finished).map((call) => call.message);
  }

  /**
   * Marks a call sent; true when it is a `wait` call whose `updated` is still to come (its data then blocks
   * the rest). One sent again to a resumed session that already had its `updated` gets none again.
   */
  markSent(id: string): boolean {
    const invocation = this.invocations.get(id);
    if (!invocation) return false;
    invocation.sent = true;
    return invocation.wait && !invocation.updated;
  }

  isSent(id: string): boolean {
    return this.invocations.get(id)?.sent ?? false;
  }

  result(message: ResultMessage): void {
    const invocation = this.invocations.get(message.id);
    if (!invocation || invocation.outcome) return;
    this.receive(invocation, message.error ? { error: DDPError.fromJSON(message.error) } : { result: message.result });
    this.finishIfDone(invocation);
  }

  /** The call's outcome is known: onResultReceived hears it, a noRetry call's failure included (as in Meteor). */
  private receive(invocation: Invocation, outcome: Outcome): void {
    invocation.outcome = outcome;
    const { onResultReceived } = invocation.options;
    if (onResultReceived) {
      callSafely(() => ('error' in outcome ? onResultReceived(outcome.error) : onResultReceived(undefined, outcome.result)));
    }
  }

  /** Its `updated` arrived; {@link dataVisible} follows once its data is on screen. */
  updateArrived(id: string): void {
    const invocation = this.invocations.get(id);
    if (invocation) invocation.updated = true;
  }

  dataVisible(id: string): void {
    const invocation = this.invocations.get(id);
    if (!invocation) return;
    invocation.dataVisible = true;
    this.finishIfDone(invocation);
  }

  /**
   * The connection dropped. Sent calls without a result fail if they are
   * `noRetry` (their ids are returned: their stubs' writes must be undone);
   * every other call will be sent again.
   */
  connectionLost(): string[] {
    const failed: string[] = [];
    for (const invocation of this.invocations.values()) {
      if (invocation.sent && !invocation.outcome && invocation.noRetry) {
        failed.push(invocation.message.id);
        const outcome = { error: ClientErrors.invocationFailed({ name: invocation.message.method }) };
        this.receive(invocation, outcome);
        this.finish(invocation, outcome);
      }
      invocation.sent = false;
    }
    return failed;
  }

  /**
   * The server started a new session: calls without a result run again (an
   * `updated` they got no longer counts). Returns the ids of calls that got
   * their result but whose `updated` was lost: they finish once the store has
   * switched to the new session's data (see {@link finishOrphans}).
   */
  newSession(): string[] {
    const orphans: string[] = [];
    for (const invocation of this.invocations.values()) {
      if (!invocation.outcome) invocation.updated = invocation.dataVisible = false;
      else if (!invocation.dataVisible) orphans.push(invocation.message.id);
    }
    return orphans;
  }

  /** Finishes calls whose `updated` was lost with an old session: the closest to "their writes are visible". */
  finishOrphans(ids: readonly string[]): void {
    for (const id of ids) {
      const invocation = this.invocations.get(id);
      if (invocation?.outcome) this.finish(invocation, invocation.outcome);
    }
  }

  /** Takes the queued blocks out, so that calls made on reconnect (a resume login) go first. */
  takeBlocks(): Block[] {
    const blocks = this.blocks;
    this.blocks = [];
    return blocks;
  }

  /** Puts blocks taken by {@link takeBlocks} back behind the ones added since (merging plain blocks, as Meteor does). */
  restoreBlocks(blocks: Block[]): void {
    const last = this.blocks.at(-1);
    const [first, ...rest] = blocks;
    if (last && first && !last.wait && !first.wait) {
      last.calls.push(...first.calls);
      this.blocks.push(...rest);
    } else {
      this.blocks.push(...blocks);
    }
  }

  failAll(error: DDPError): void {
    const invocations = [...this.invocations.values()];
    this.invocations.clear();
    this.blocks = [];
    for (const invocation of invocations) invocation.settle.reject(error);
    this.notifyIfIdle();
  }

  /** Calls `callback` once no call is outstanding: at once if none is. */
  whenIdle(callback: () => void): void {
    this.idleCallbacks.push(callback);
    this.notifyIfIdle();
  }

  private notifyIfIdle(): void {
    if (this.invocations.size > 0) return;
    for (const callback of this.idleCallbacks.splice(0)) callSafely(callback);
  }

  private finishIfDone(invocation: Invocation): void {
    if (invocation.outcome && invocation.dataVisible) this.finish(invocation, invocation.outcome);
  }

  private finish(invocation: Invocation, outcome: Outcome): void {
    if (invocation.finished) return;
    invocation.finished = true;
    this.invocations.delete(invocation.message.id);
    if ('error' in outcome) invocation.settle.reject(outcome.error);
    else invocation.settle.resolve(outcome.result);
    // The block in flight is done when all its calls are: the next one goes out.
    while (this.blocks[0]?.calls.every((call) => call.finished)) this.blocks.shift();
    this.notifyIfIdle();
  }
}
