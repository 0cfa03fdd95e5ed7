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
  /** A percentile with fewer than FEW_TIMINGS timings beyond it in either run: its change is noise, never marked. */
  fewTimings?: boolean;
  /** A latency, in ms: a change of less than the floor (Judging.floorMs) is never marked. */
  latency?: boolean;
}

/** What a change must exceed to be marked: a share of the baseline's value and, for a latency, a number of ms. */
export interface Judging {
  percent: number;
  /** Sub-millisecond latencies move by tens of percent between identical runs: a change under this is not marked. */
  floorMs: number;
}

export interface Comparison {
  differences: Difference[];
  /** Empty when a difference blocks the comparison. */
  changes: Change[];
  /** Figures left out because the runs' lengths differ. */
  leftOut: string[];
}

const LENGTH_BOUND = ['operations/s', 'subscriptions/min', 'server peak RSS MB'];

/**
 * Timings a percentile must have beyond it, in both runs, for its change to be
 * marked: the p99 of 10 calls is the slowest one, and two runs of the same load
 * differ by half or double there.
 */
const FEW_TIMINGS = 10;

interface Figure {
  figure: string;
  value: number;
  higherIsBetter: boolean;
  /** For a percentile: how many timings lie beyond it. */
  beyond?: number;
  latency?: boolean;
}

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

function figures(report: LoadReport): Figure[] {
  const out: Figure[] = [];
  for (const [name, s] of Object.entries(report.measures)) {
    for (const [p, share] of [['p50', 0.5], ['p95', 0.05], ['p99', 0.01]] as const) out.push({ figure: `${name} ${p} ms`, value: s[p], higherIsBetter: false, beyond: s.count * share, latency: true });
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

/** How much of its load a run's figures cover: all of it, or the part before a Ctrl-C, or all but a lost generator process's users. */
function coverage(report: LoadReport): string {
  if (report.interrupted) return `interrupted after ${report.seconds.toFixed(1)} s`;
  const lost = report.lostGenerators?.length ?? 0;
  if (lost > 0) return `${lost} generator process${lost === 1 ? '' : 'es'} lost`;
  return 'whole';
}

export function compareReports(current: LoadReport, baseline: LoadReport): Comparison {
  const differences = setupDifferences(baseline, current);
  if (differences.some((d) => d.blocks)) return { differences, changes: [], leftOut: [] };
  // A run cut short counts fewer operations and less wind-down: its rates compare as a shorter run's do, which is not at all.
  differ(differences, 'figures', coverage(baseline), coverage(current), false);
  const lengthDiffers = differences.some((d) => d.what === 'duration' || d.what === 'figures');
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
    const fewTimings = Math.min(now.beyond ?? Infinity, then.beyond ?? Infinity) < FEW_TIMINGS;
    changes.push({
      figure: now.figure,
      baseline: then.value,
      current: now.value,
      changePercent,
      worsePercent: now.higherIsBetter ? -changePercent : changePercent,
      ...(fewTimings ? { fewTimings } : {}),
      ...(now.latency ? { latency: true } : {}),
    });
  }
  return { differences, changes, leftOut };
}

/** How a change reads against the threshold: marked worse or better, noise (too few timings, under the floor), or within it. */
export function verdict(c: Change, judging: Judging): string {
  if (Math.abs(c.worsePercent) <= judging.percent) return '';
  if (c.fewTimings) return 'few timings';
  if (c.latency && Math.abs(c.current - c.baseline) < judging.floorMs) return `under ${judging.floorMs} ms`;
  return c.worsePercent > 0 ? 'WORSE' : 'better';
}

export function compareText({ differences, changes, leftOut }: Comparison, judging: Judging): string {
  const lines = differences.map((d) => `differs: ${differenceText(d)}`);
  if (differences.some((d) => d.blocks)) return [...lines, 'not compared: the runs put different loads on the server'].join('\n');
  if (leftOut.length) lines.push(`left out: ${leftOut.join(', ')} (they depend on a run's length)`);
  const rows = changes.map((c) => {
    const change = c.changePercent === Infinity ? 'from 0' : `${c.changePercent > 0 ? '+' : ''}${c.changePercent.toFixed(1)} %`;
    return [c.figure, c.baseline.toFixed(2), c.current.toFixed(2), change, verdict(c, judging)];
  });
  const floor = judging.floorMs > 0 ? ` or a latency moved less than ${judging.floorMs} ms` : '';
  lines.push(`compared with the baseline (a change worse or better than ${judging.percent} % is marked, unless a percentile has fewer than ${FEW_TIMINGS} timings beyond it${floor}):`);
  lines.push(textTable([['figure', 'baseline', 'this run', 'change', ''], ...rows]));
  return lines.join('\n');
}
