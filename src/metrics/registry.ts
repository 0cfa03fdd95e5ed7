/**
 * Counters and gauges the rest of the server writes into. A leaf module: it
 * imports nothing of Perseid's layers, so any layer may record into it; the APM, the
 * Prometheus endpoint and the benchmarks read from it.
 */
import { BoundedNames, OTHER } from './bounded-names.js';

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

/** A counter per set of label values (a job and its outcome); at most 500 sets, the rest under `(other)`. */
export class LabelledCounter {
  private readonly series = new BoundedNames<{ labels: Record<string, string>; value: number }>(500, () => ({ labels: this.labelled(() => OTHER), value: 0 }));
  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
  ) {}
  inc(labels: Readonly<Record<string, string>>, by = 1): void {
    const key = this.labelNames.map((n) => labels[n] ?? '').join('\u0000');
    this.series.get(key, () => ({ labels: this.labelled((n) => labels[n] ?? ''), value: 0 })).value += by;
  }
  /** The total over every label set (what /perseid/stats shows under the name). */
  get(): number {
    return this.series.values().reduce((n, s) => n + s.value, 0);
  }
  values(): Array<{ labels: Record<string, string>; value: number }> {
    return this.series.values();
  }
  private labelled(value: (name: string) => string): Record<string, string> {
    return Object.fromEntries(this.labelNames.map((n) => [n, value(n)]));
  }
}

type Metric = Counter | Gauge | LabelledCounter;

export class MetricsRegistry {
  private readonly metrics = new Map<string, Metric>();
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

  labelledCounter(name: string, help: string, labelNames: readonly string[]): LabelledCounter {
    return this.register(name, () => new LabelledCounter(name, help, labelNames), LabelledCounter);
  }

  private register<T extends Metric>(name: string, make: () => T, kind: abstract new (...args: never[]) => T): T {
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

  list(): Metric[] {
    return [...this.metrics.values()];
  }
}

/** The process-wide registry. */
export const metrics = new MetricsRegistry();
