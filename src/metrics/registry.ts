/**
 * Counters and gauges the rest of the server writes into. A leaf module: it
 * imports nothing of Perseid, so any layer may record into it; the APM, the
 * Prometheus endpoint and the benchmarks read from it.
 */

export class Counter {
  private value = 0;
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  inc(by = 1): void {
    this.value += by;
  }
  get(): number {
    return this.value;
  }
}

export class Gauge {
  private value = 0;
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  set(value: number): void {
    this.value = value;
  }
  inc(by = 1): void {
    this.value += by;
  }
  dec(by = 1): void {
    this.value -= by;
  }
  get(): number {
    return this.value;
  }
}

export class MetricsRegistry {
  private readonly metrics = new Map<string, Counter | Gauge>();
  private readonly sections = new Map<string, () => unknown>();

  /** Adds a structured part to reports (e.g. the list of live queries), computed when read. */
  section(name: string, describe: () => unknown): void {
    this.sections.set(name, describe);
  }

  removeSection(name: string): void {
    this.sections.delete(name);
  }

  /** Every section's current value, by name. */
  describeSections(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const [name, describe] of this.sections) out[name] = describe();
    return out;
  }

  counter(name: string, help: string): Counter {
    return this.register(name, () => new Counter(name, help), Counter);
  }

  gauge(name: string, help: string): Gauge {
    return this.register(name, () => new Gauge(name, help), Gauge);
  }

  private register<T extends Counter | Gauge>(name: string, make: () => T, kind: new (n: string, h: string) => T): T {
    const existing = this.metrics.get(name);
    if (existing) {
      if (!(existing instanceof kind)) throw new Error(`Metric ${name} is already registered as another kind`);
      return existing;
    }
    const metric = make();
    this.metrics.set(name, metric);
    return metric;
  }

  /** Current values by name, for reports and tests. */
  snapshot(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [name, metric] of this.metrics) out[name] = metric.get();
    return out;
  }

  list(): Array<Counter | Gauge> {
    return [...this.metrics.values()];
  }
}

/** The process-wide registry. */
export const metrics = new MetricsRegistry();
