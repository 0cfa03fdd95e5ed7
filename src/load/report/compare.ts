/**
 * `--compare baseline.json`: every figure's change against a previous run, and
 * whether any got worse than allowed. Only runs that put the same load on the
 * server compare: the same scenario, client, parameters, think time and
 * arrival rate or concurrency. Runs that differ only in length compare on the
 * figures a run's length does not sway (latencies, failures and CPU per
 * operation); the rates, which count the run's wind-down too, and the peak
 * memory are left out.
 */
import type { LoadReport, RunSetup } from './model.js';
import { shapeText, textTable } from './text.js';

export interface Difference {
  what: string;
  baseline: string;
  current: string;
  /** The two runs load the server differently: their figures do not compare. */
  blocks: boolean;
}

export interface Change {
  figure: string;
  baseline: number;
  current: number;
  /** How much the figure changed, percent of the baseline's (Infinity from a baseline of 0). */
  changePercent: number;
  /** Percent; positive is worse. */
  worsePercent: number;
}

export interface Comparison {
  differences: Difference[];
  /** Empty when a difference blocks the comparison. */
  changes: Change[];
  /** Figures left out because the runs' lengths differ. */
  leftOut: string[];
}

const LENGTH_BOUND = ['operations/s', 'subscriptions/min', 'server peak RSS MB'];

function differ(out: Difference[], what: string, baseline: string, current: string, blocks = true): void {
  if (baseline !== current) out.push({ what, baseline, current, blocks });
}

/** The run's length, when its load is otherwise a constant rate or concurrency (so that runs differing only in it still compare). */
function steadyLength(shape: RunSetup['shape']): { load: string; seconds: number } | undefined {
  if (shape.concurrency !== undefined) return { load: `${shape.concurrency} users at once, ${shape.iterations ?? 'unbounded'} runs each`, seconds: shape.duration ?? 0 };
  const [phase, ...more] = shape.phases ?? [];
  if (!phase || more.length > 0 || (phase.rampTo !== undefined && phase.rampTo !== phase.arrivalRate)) return undefined;
  return { load: `${phase.arrivalRate} users/s`, seconds: phase.duration };
}

/** What differs between the two runs' setups, in the order a person would check it. */
export function setupDifferences(baseline: RunSetup, current: RunSetup): Difference[] {
  const out: Difference[] = [];
  differ(out, 'scenario', baseline.scenario.name, current.scenario.name);
  differ(out, 'client', baseline.client, current.client);
  for (const key of new Set([...Object.keys(baseline.params), ...Object.keys(current.params)]).values()) {
    differ(out, `param ${key}`, baseline.params[key] ?? '(unset)', current.params[key] ?? '(unset)');
  }
  differ(out, 'think time', `${baseline.shape.thinkMs} ms`, `${current.shape.thinkMs} ms`);
  const [before, now] = [steadyLength(baseline.shape), steadyLength(current.shape)];
  if (before && now && before.load === now.load) differ(out, 'duration', `${before.seconds} s`, `${now.seconds} s`, false);
  else differ(out, 'load', shapeText(baseline.shape), shapeText(current.shape));
  differ(out, 'generator processes', String(baseline.shape.processes ?? 1), String(current.shape.processes ?? 1), false);
  return out;
}

export function differenceText(d: Difference): string {
  return `${d.what}: ${d.baseline} in the baseline, ${d.current} in this run`;
}

function figures(report: LoadReport): Array<{ figure: string; value: number; higherIsBetter: boolean }> {
  const out: Array<{ figure: string; value: number; higherIsBetter: boolean }> = [];
  for (const [name, s] of Object.entries(report.measures)) {
    for (const p of ['p50', 'p95', 'p99'] as const) out.push({ figure: `${name} ${p} ms`, value: s[p], higherIsBetter: false });
  }
  out.push({ figure: 'operations/s', value: report.rates.operationsPerSecond, higherIsBetter: true });
  if (report.rates.subscriptionsPerMinute !== undefined) out.push({ figure: 'subscriptions/min', value: report.rates.subscriptionsPerMinute, higherIsBetter: true });
  // A share, not a count: comparable between runs of different lengths.
  out.push({ figure: 'failed users %', value: report.users.started > 0 ? (100 * report.users.failed) / report.users.started : 0, higherIsBetter: false });
  if (report.server) {
    const operations = Object.entries(report.measures).reduce((n, [name, s]) => n + (name === 'connect' ? 0 : s.count), 0);
    if (operations > 0) out.push({ figure: 'server CPU ms / operation', value: (1000 * report.server.cpuSeconds) / operations, higherIsBetter: false });
    out.push({ figure: 'server peak RSS MB', value: report.server.peakRssMb, higherIsBetter: false });
  }
  return out;
}

export function compareReports(current: LoadReport, baseline: LoadReport): Comparison {
  const differences = setupDifferences(baseline, current);
  if (differences.some((d) => d.blocks)) return { differences, changes: [], leftOut: [] };
  const lengthDiffers = differences.some((d) => d.what === 'duration');
  const before = new Map(figures(baseline).map((f) => [f.figure, f]));
  const changes: Change[] = [];
  const leftOut: string[] = [];
  for (const now of figures(current)) {
    const then = before.get(now.figure);
    if (!then || !Number.isFinite(now.value) || !Number.isFinite(then.value)) continue;
    if (lengthDiffers && LENGTH_BOUND.includes(now.figure)) {
      leftOut.push(now.figure);
      continue;
    }
    const changePercent = then.value === 0 ? (now.value === 0 ? 0 : Infinity) : ((now.value - then.value) / Math.abs(then.value)) * 100;
    changes.push({ figure: now.figure, baseline: then.value, current: now.value, changePercent, worsePercent: now.higherIsBetter ? -changePercent : changePercent });
  }
  return { differences, changes, leftOut };
}

export function compareText({ differences, changes, leftOut }: Comparison, thresholdPercent: number): string {
  const lines = differences.map((d) => `differs: ${differenceText(d)}`);
  if (differences.some((d) => d.blocks)) return [...lines, 'not compared: the runs put different loads on the server'].join('\n');
  if (leftOut.length) lines.push(`left out: ${leftOut.join(', ')} (they depend on a run's length)`);
  const rows = changes.map((c) => {
    const verdict = c.worsePercent > thresholdPercent ? 'WORSE' : c.worsePercent < -thresholdPercent ? 'better' : '';
    const change = c.changePercent === Infinity ? 'from 0' : `${c.changePercent > 0 ? '+' : ''}${c.changePercent.toFixed(1)} %`;
    return [c.figure, c.baseline.toFixed(2), c.current.toFixed(2), change, verdict];
  });
  lines.push(`compared with the baseline (a change worse or better than ${thresholdPercent} % is marked):`);
  lines.push(textTable([['figure', 'baseline', 'this run', 'change', ''], ...rows]));
  return lines.join('\n');
}
