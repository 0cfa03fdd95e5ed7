/**
 * A tiny typed event emitter. Node's EventEmitter is not available in browsers,
 * and the client needs little more than "add a listener, get a way to remove it".
 */

export type Listener<A extends unknown[]> = (...args: A) => void;

/**
 * Calls the application's `callback`; if it throws, the error is reported as
 * a DOM event handler's is (asynchronously, as an uncaught error), so that it
 * cannot leave the client half-way through a state change.
 */
export function callSafely(callback: () => void): void {
  try {
    callback();
  } catch (error) {
    queueMicrotask(() => {
      throw error;
    });
  }
}

/** The listeners of one event. */
export class ListenerSet<A extends unknown[]> {
  private readonly listeners = new Set<Listener<A>>();

  /** Adds a listener; returns a function that removes it. */
  add(listener: Listener<A>): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Calls every listener (see {@link callSafely}). */
  notify(...args: A): void {
    for (const listener of this.listeners) callSafely(() => listener(...args));
  }

  clear(): void {
    this.listeners.clear();
  }

  get size(): number {
    return this.listeners.size;
  }
}

/** Named events, each with its own argument list: `Emitter<{ ready: [id: string] }>`. */
export class Emitter<Events extends Record<keyof Events, unknown[]>> {
  private readonly sets: { [K in keyof Events]?: ListenerSet<Events[K]> } = {};

  /** Adds a listener; returns a function that removes it. */
  on<K extends keyof Events>(event: K, listener: Listener<Events[K]>): () => void {
    const set = (this.sets[event] ??= new ListenerSet<Events[K]>());
    return set.add(listener);
  }

  /** Like {@link on}, for the next occurrence only. */
  once<K extends keyof Events>(event: K, listener: Listener<Events[K]>): () => void {
    const off = this.on(event, (...args) => {
      off();
      listener(...args);
    });
    return off;
  }

  protected listens(event: keyof Events): boolean {
    return (this.sets[event]?.size ?? 0) > 0;
  }

  protected emit<K extends keyof Events>(event: K, ...args: Events[K]): void {
    this.sets[event]?.notify(...args);
  }
}
