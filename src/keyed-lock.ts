/**
 * Runs tasks that hold a common key one after another, and tasks with no key
 * in common at once. Keys are taken in sorted order, so two tasks wanting the
 * same keys cannot wait on each other for ever. A task holds its keys at most
 * `holdMs`: one that never settles (awaiting a service that hangs) would
 * otherwise keep every later task on its keys waiting for good.
 */
export class KeyedLock {
  /** Per key, a promise that settles when the last task queued on it is done (or has held it `holdMs`). */
  private readonly tails = new Map<string, Promise<void>>();

  constructor(private readonly holdMs: number) {}

  run<T>(keys: readonly string[], task: () => Promise<T>): Promise<T> {
    const [first, ...rest] = [...new Set(keys)].sort();
    if (first === undefined) return task();
    return this.runHolding(first, () => this.run(rest, task));
  }

  private async runHolding<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const done = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => done);
    this.tails.set(key, tail);
    await previous;
    const free = () => {
      clearTimeout(timer);
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    };
    const timer = setTimeout(free, this.holdMs).unref();
    try {
      return await task();
    } finally {
      free();
    }
  }
}
