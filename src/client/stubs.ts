/**
 * Method stubs (Meteor's client-side "simulations"): a function registered
 * under a method's name runs at once when the method is called, against the
 * local collections, so the page shows the effect before the server answers.
 * Its random stream is seeded with the `randomSeed` the call then carries, so
 * an insert gets the same `_id` in the stub and on the server. An async stub
 * stays the running stub until it settles (client.ts, simulate).
 */
import { collectionIdSequence, makeRpcSeed, RandomStream } from '../ddp/random.js';
import type { Document } from './documents.js';
import type { ActiveStub } from './local-collection.js';

/** `this` inside a stub, like the server's method invocation where it makes sense on a client. */
export interface StubInvocation {
  readonly name: string;
  /** Always true: tells shared method code it runs as a stub. */
  readonly isSimulation: true;
  /** The logged-in user as the client knows it. */
  readonly userId: string | null;
  /** The seed this call sends as `randomSeed` (created, and so sent, only when asked for). */
  randomSeed(): string;
  /** The call's random stream: `randomStream.sequence(name)` draws what the server draws. */
  readonly randomStream: RandomStream;
  /** A no-op on the client (for code shared with the server). */
  unblock(): void;
}

// `any` as Meteor's stubs take whatever the call passes; typed stubs come from defineMethod.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Stub = (this: StubInvocation, ...args: any[]) => unknown;

/** One running stub: hands out ids from its stream and reports each document it writes. */
export class Simulation implements ActiveStub, StubInvocation {
  readonly isSimulation = true;
  /** Until it has settled: an async stub runs on after its call returned. */
  running = true;
  private stream: RandomStream | undefined;

  constructor(
    readonly name: string,
    /** The outermost call's id: nested stubs' writes belong to it. */
    readonly methodId: string,
    readonly userId: string | null,
    private readonly enclosing: Simulation | undefined,
    private readonly written: (collection: string, id: string, original: Document | undefined, methodId: string) => void,
    /** A seed the caller chose (MethodOptions.randomSeed); otherwise one is made when first needed. */
    private seed?: string,
  ) {}

  /** The seed, if the stub drew from its stream (the call then sends it). */
  get usedSeed(): string | undefined {
    return this.seed;
  }

  randomSeed(): string {
    this.seed ??= makeRpcSeed(this.enclosing?.randomStream, this.name);
    return this.seed;
  }

  get randomStream(): RandomStream {
    this.stream ??= new RandomStream(this.randomSeed());
    return this.stream;
  }

  unblock(): void {}

  newId(collection: string): string {
    return collectionIdSequence(this.randomStream, collection).id();
  }

  willWrite(collection: string, id: string, original: Document | undefined): void {
    this.written(collection, id, original, this.methodId);
  }
}
