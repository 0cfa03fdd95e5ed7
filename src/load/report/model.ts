/** The record of one load run: what ran, how, and what was measured (the --json output). */
import type { LatencySummary } from '../measurements.js';
import type { RunResult } from '../runner.js';
import type { Phase } from '../scenario.js';

export interface ServerSample {
  /** Seconds since the start of the run. */
  t: number;
  cpuPercent: number;
  rssMb: number;
}

export interface ServerFigures {
  /** The process sampled, with every process under it. */
  pid: number;
  /** The most processes there were at once (the pid's and those under it). */
  processes: number;
  cpuSeconds: number;
  cpuPercent: number;
  peakRssMb: number;
  samples: ServerSample[];
}

/** What was run, and how: what two runs must share to be compared. */
export interface RunSetup {
  scenario: { name: string; description: string };
  client: 'lean' | 'full';
  shape: { phases?: Phase[]; concurrency?: number; duration?: number; iterations?: number; thinkMs: number; processes?: number };
  params: Record<string, string>;
}

export interface LoadReport extends RunResult, RunSetup {
  tool: 'perseid load';
  date: string;
  node: string;
  command: string;
  url: string;
  rates: { operationsPerSecond: number; subscriptionsPerMinute?: number };
  server?: ServerFigures;
}

/** Every timed operation but connecting, per second of the run. */
export function operationsPerSecond(measures: Record<string, LatencySummary>, seconds: number): number {
  let count = 0;
  for (const [name, summary] of Object.entries(measures)) if (name !== 'connect') count += summary.count;
  return seconds > 0 ? count / seconds : 0;
}
