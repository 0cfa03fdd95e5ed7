/** What a load scenario is: a function run once per simulated user, with a context for timings. */
import type { LoadClient } from './load-client.js';

export interface ScenarioContext {
  /** This user's number, from 0. */
  readonly vu: number;
  /** `--param key=value` settings. */
  readonly params: Readonly<Record<string, string>>;
  /** Pause of `--think-ms` between actions. */
  readonly thinkMs: number;
  /** False once the run is ending: loops in a scenario should stop. */
  readonly running: boolean;
  sleep(ms: number): Promise<void>;
  /** Sleeps `thinkMs`. */
  think(): Promise<void>;
  /** Times `fn` under `name` (a failure is counted as an error, not a timing). */
  measure<T>(name: string, fn: () => Promise<T>): Promise<T>;
  /** Counts something that happened (`ctx.count('messages received', 3)`), reported with the totals. */
  count(name: string, by?: number): void;
}

export type Scenario = (client: LoadClient, ctx: ScenarioContext) => Promise<void>;

export interface Phase {
  /** Seconds. */
  duration: number;
  /** Users starting per second at the phase's beginning. */
  arrivalRate: number;
  /** Users per second at its end (a linear ramp); default arrivalRate. */
  rampTo?: number;
}

/** How a scenario runs unless the command line says otherwise. */
export interface ScenarioDefaults {
  description: string;
  client?: 'lean' | 'full';
  /** Arrival model: users start at these rates, each runs the scenario once. */
  phases?: Phase[];
  /** Or fixed concurrency: this many users, each running the scenario again and again (MeteorDown's model). */
  concurrency?: number;
  /** Seconds, for fixed concurrency. */
  duration?: number;
  params?: Record<string, string>;
}

export interface ScenarioModule {
  default: Scenario;
  options?: Partial<ScenarioDefaults>;
}
