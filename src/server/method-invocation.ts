/** `this` inside a method (Meteor's `MethodInvocation`). */
import type { RandomStream } from '../ddp/random.js';
import type { ConnectionHandle } from './connection-handle.js';

export type MethodHandler = (this: MethodInvocation, ...params: unknown[]) => unknown;

export interface InvocationHost {
  readonly userId: string | null;
  setUserId(userId: string | null): Promise<void>;
}

export class MethodInvocation {
  /** Always false on the server: this is the real run, not a client stub. */
  readonly isSimulation = false;
  private unblocked = false;
  private user: string | null;

  constructor(
    readonly name: string,
    readonly connection: ConnectionHandle,
    private readonly host: InvocationHost,
    private readonly onUnblock: () => void,
    /** The client's seed, when it sent one: inserts then get the ids the client predicted. */
    readonly randomSeed: string | undefined,
    readonly randomStream: RandomStream | undefined,
  ) {
    this.user = host.userId;
  }

  /** The user who called it, as in Meteor: a login or logout by another call meanwhile does not change it, its own does. */
  get userId(): string | null {
    return this.user;
  }

  /** Logs the connection in (or out, with null); its subscriptions re-run as that user. */
  setUserId(userId: string | null): Promise<void> {
    if (userId !== null && typeof userId !== 'string') throw new TypeError('setUserId takes a string or null');
    this.user = userId;
    return this.host.setUserId(userId);
  }

  /** Lets the connection's next message run now instead of after this method returns. */
  unblock(): void {
    if (this.unblocked) return;
    this.unblocked = true;
    this.onUnblock();
  }
}
