/**
 * A store (the embedded one, in these tests) as the live-query tests need it: its update events
 * reshaped into the MongoDB drivers' shapes (whole document, modifier only, id
 * only), and its reads paused where a test says (a random delay, or until the
 * test releases them), so live queries are loading or busy while changes arrive.
 */
import type { ChangeEvent, ChangeListener, ChangeSource } from '../src/data/change-source.js';
import type { CollectionDriver, StorageDriver } from '../src/data/driver.js';
import type { Document, QuerySpec } from '../src/data/types.js';

export type Shape = 'doc' | 'modifier' | 'id';

/** What a read waits for before it reads (`before`) and before its result is returned (`after`); undefined: nothing. */
export type ReadPause = (query: QuerySpec, when: 'before' | 'after') => Promise<void> | undefined;

export class ReshapingDriver implements StorageDriver {
  readonly kind = 'embedded (reshaped)';
  readonly changes: ChangeSource;
  /** How the events of the write under way are delivered. */
  shape: { kind: Shape; modifier?: Document } = { kind: 'doc' };
  private readonly wrapped = new Map<string, CollectionDriver>();

  constructor(
    private readonly store: StorageDriver,
    private readonly pause: ReadPause,
  ) {
    const source = store.changes;
    this.changes = {
      name: 'reshaped write log',
      kind: source.kind,
      watch: (collection: string, listener: ChangeListener) => source.watch(collection, (event) => listener(this.reshape(event))),
      delivered: (token: unknown) => source.delivered(token),
    };
  }

  private reshape(event: ChangeEvent): ChangeEvent {
    if (event.op === 'remove' || event.op === 'resync') return event;
    const { kind, modifier } = this.shape;
    if (kind === 'doc') return event;
    // As the MongoDB driver publishes its own writes: an update without the document; a
    // document an upsert inserted, by id alone (its modifier says nothing of fields it lacks).
    const { seq, collection, id } = event;
    return kind === 'modifier' && modifier && event.op === 'update' ? { seq, collection, op: 'update', id, modifier } : { seq, collection, op: 'update', id };
  }

  collection(name: string): CollectionDriver {
    let driver = this.wrapped.get(name);
    if (!driver) {
      const inner = this.store.collection(name);
      driver = Object.create(inner) as CollectionDriver;
      // A read's result may arrive after later changes.
      driver.find = async (query) => {
        await this.pause(query, 'before');
        const result = await inner.find(query);
        await this.pause(query, 'after');
        return result;
      };
      this.wrapped.set(name, driver);
    }
    return driver;
  }

  async close(): Promise<void> {}
}

/** A pause of `ms()` milliseconds (0: the next timer turn), asked anew for each pause. */
export function randomPause(ms: () => number): ReadPause {
  return () => new Promise((resolve) => setTimeout(resolve, ms()));
}

/** Reads held after they read, until the test releases them: it decides which result arrives when. */
export class HeldReads {
  private held: Array<{ query: QuerySpec; release: () => void }> = [];
  private arrivals: Array<() => void> = [];
  private open = false;

  /** The ReadPause to give the driver. */
  readonly pause: ReadPause = (query, when) => {
    if (when === 'before' || this.open) return undefined;
    return new Promise<void>((release) => {
      this.held.push({ query, release });
      for (const arrived of this.arrivals.splice(0)) arrived();
    });
  };

  /** Waits for a held read whose query `matches`, and takes it out of the held ones; call the result to release it. */
  async next(matches: (query: QuerySpec) => boolean): Promise<() => void> {
    for (;;) {
      const at = this.held.findIndex((read) => matches(read.query));
      if (at >= 0) return this.held.splice(at, 1)[0]!.release;
      await new Promise<void>((resolve) => this.arrivals.push(resolve));
    }
  }

  /** Releases every held read, and lets later ones through. */
  openAll(): void {
    this.open = true;
    for (const read of this.held.splice(0)) read.release();
  }

  /** Holds later reads again. */
  close(): void {
    this.open = false;
  }
}
