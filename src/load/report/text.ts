/** Text the reports share: numbers, aligned tables, a run's shape, the server's figures. */
import type { RunSetup, ServerFigures } from './model.js';

export const fmt = (n: number | undefined, digits = 1) => (n === undefined || !Number.isFinite(n) ? '-' : n.toFixed(digits));

/** Rows of cells in columns: the first left-aligned, the others right-aligned. */
export function textTable(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows.map((r) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ').trimEnd()).join('\n');
}

/** "3 users at once for 60 s", or the arrival phases: "60 s at 4/s, 30 s at 4→8/s". */
export function shapeText(shape: RunSetup['shape']): string {
  if (shape.concurrency !== undefined) {
    return `${shape.concurrency} users at once for ${shape.duration} s${shape.iterations !== undefined ? `, ${shape.iterations} runs each` : ''}`;
  }
  return (shape.phases ?? []).map((p) => `${p.duration} s at ${p.arrivalRate}${p.rampTo !== undefined ? `→${p.rampTo}` : ''}/s`).join(', ');
}

/** The server's figures in a line: the text summary's and the HTML report's. */
export function serverText(server: ServerFigures): string {
  const processes = `${server.processes} process${server.processes === 1 ? '' : 'es'}`;
  return `pid ${server.pid} (${processes}): ${fmt(server.cpuSeconds, 2)} s CPU (${fmt(server.cpuPercent)} % of a core), peak RSS ${server.peakRssMb} MB`;
}

/** What the duration of an interrupted run says, in the summary and the HTML report. */
export const INTERRUPTED = 'interrupted: the figures cover only this part of the run';
