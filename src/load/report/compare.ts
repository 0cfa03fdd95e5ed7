/** `--compare baseline.json`: every figure's change against a previous run, and whether any got worse than allowed. */
import type { LoadReport } from './model.js';

export interface Change {
  figure: string;
  baseline: number;
  current: number;
  /** Percent; positive is worse. */
  worsePercent: number;
}

function figures(report: LoadReport): Array<{ figure: string; value: number; higherIsBetter: boolean }> {
  const out: Array<{ figure: string; value: number; higherIsBetter: boolean }> = [];
  for (const [name, s] of Object.entries(report.measures)) {
    for (const p of ['p50', 'p95', 'p99'] as const) out.push({ figure: `${name} ${p} ms`, value: s[p], higherIsBetter: false });
  }
  out.push({ figure: 'operations/s', value: report.rates.operationsPerSecond, higherIsBetter: true });
  if (report.rates.subscriptionsPerMinute !== undefined) out.push({ figure: 'subscriptions/min', value: report.rates.subscriptionsPerMinute, higherIsBetter: true });
  out.push({ figure: 'failed users', value: report.users.failed, higherIsBetter: false });
  if (report.server) {
    const operations = Object.entries(report.measures).reduce((n, [name, s]) => n + (name === 'connect' ? 0 : s.count), 0);
    if (operations > 0) out.push({ figure: 'server CPU ms / operation', value: (1000 * report.server.cpuSeconds) / operations, higherIsBetter: false });
    out.push({ figure: 'server peak RSS MB', value: report.server.peakRssMb, higherIsBetter: false });
  }
  return out;
}

export function compareReports(current: LoadReport, baseline: LoadReport): Change[] {
  const before = new Map(figures(baseline).map((f) => [f.figure, f]));
  const changes: Change[] = [];
  for (const now of figures(current)) {
    const then = before.get(now.figure);
    if (!then || !Number.isFinite(now.value) || !Number.isFinite(then.value)) continue;
    const delta = then.value === 0 ? (now.value === 0 ? 0 : Infinity) : ((now.value - then.value) / Math.abs(then.value)) * 100;
    changes.push({ figure: now.figure, baseline: then.value, current: now.value, worsePercent: now.higherIsBetter ? -delta : delta });
  }
  return changes;
}

export function compareText(changes: Change[], thresholdPercent: number): string {
  const rows = changes.map((c) => {
    const mark = c.worsePercent > thresholdPercent ? '  WORSE' : c.worsePercent < -thresholdPercent ? '  better' : '';
    const pct = Number.isFinite(c.worsePercent) ? `${c.worsePercent > 0 ? '+' : ''}${c.worsePercent.toFixed(1)} %` : 'new';
    return `${c.figure.padEnd(32)} ${c.baseline.toFixed(2).padStart(12)} → ${c.current.toFixed(2).padStart(12)}  ${pct.padStart(9)} worse${mark}`;
  });
  return [`compared with the baseline (threshold ${thresholdPercent} %):`, ...rows].join('\n');
}
