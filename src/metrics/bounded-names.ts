/**
 * Figures kept per name (a method, a publication, a query shape) with a cap on
 * how many names: past it, new names share one `(other)` entry, so no input,
 * and no app that makes names up as it goes, grows memory without bound or
 * gives Prometheus a series per argument.
 */

/** The name every name past the cap is counted under. */
export const OTHER = '(other)';

export class BoundedNames<T> {
  private readonly entries = new Map<string, T>();
  private other: T | undefined;
  /** Lookups that fell into `(other)` because the cap was reached. */
  overflowed = 0;

  constructor(
    readonly cap: number,
    private readonly make: (name: string) => T,
  ) {}

  /** The entry of `name`, made by `make` (default: the constructor's) when new and under the cap. */
  get(name: string, make: (name: string) => T = this.make): T {
    const found = this.entries.get(name);
    if (found !== undefined) return found;
    if (this.entries.size < this.cap) {
      const made = make(name);
      this.entries.set(name, made);
      return made;
    }
    this.overflowed++;
    return (this.other ??= this.make(OTHER));
  }

  /** The entry of `name` if it has one (no entry is made). */
  peek(name: string): T | undefined {
    return this.entries.get(name);
  }

  get size(): number {
    return this.entries.size + (this.other ? 1 : 0);
  }

  values(): T[] {
    const out = [...this.entries.values()];
    if (this.other) out.push(this.other);
    return out;
  }

  clear(): void {
    this.entries.clear();
    this.other = undefined;
    this.overflowed = 0;
  }
}
