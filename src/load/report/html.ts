/**
 * A self-contained HTML report: summary tables and time-series charts of
 * latency, throughput, errors and the server's CPU and memory. The chart
 * library (uPlot) and the data are inlined, so the file opens anywhere, offline.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { LoadReport } from './model.js';
import { INTERRUPTED, serverText, shapeText } from './text.js';

const require = createRequire(import.meta.url);

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const fmt = (n: number | undefined, digits = 1) => (n === undefined || !Number.isFinite(n) ? '–' : n.toFixed(digits));

function tableHtml(head: string[], rows: string[][]): string {
  return `<table><thead><tr>${head.map((h) => `<th>${escapeHtml(h)}</th>`).join('')}</tr></thead><tbody>${rows
    .map((r) => `<tr>${r.map((c) => `<td>${escapeHtml(c)}</td>`).join('')}</tr>`)
    .join('')}</tbody></table>`;
}

/**
 * Runs in the page: builds the charts from the embedded report. Each measure
 * has its own colour (its p99 dashed), the legends list every series without
 * hovering, and every axis starts at zero.
 */
const CHARTS_SCRIPT = `
const report = JSON.parse(document.getElementById('report-data').textContent);
const width = () => Math.min(1100, document.body.clientWidth - 40);
// Tableau 10, then hues a golden angle apart: no two series share a colour.
const palette = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#bab0ac'];
const colour = (i) => palette[i] ?? 'hsl(' + Math.round((i * 137.508) % 360) + ', 65%, 45%)';
const fromZero = (u, min, max) => [0, max > 0 ? max * 1.05 : 1];
function chart(id, title, series, data, axes) {
  const el = document.getElementById(id);
  if (!el) return;
  const opts = {
    title, width: width(), height: 260,
    legend: { live: false },
    scales: { x: { time: false, range: fromZero }, y: { range: fromZero }, y2: { range: fromZero } },
    axes: [{ label: 'seconds' }, { label: axes[0] }, ...(axes[1] ? [{ side: 1, scale: 'y2', label: axes[1], grid: { show: false } }] : [])],
    series: [{ label: 's' }, ...series.map((s, i) => ({ stroke: colour(s.colour ?? i), width: 1.5, spanGaps: true, ...s }))],
  };
  window.charts.push(new uPlot(opts, data, el));
}
window.charts = [];
const tl = report.timeline;
const t = tl.map((p) => p.t);
const names = Object.keys(report.measures);
chart('latency', 'Latency (ms) per second: p50 solid, p99 dashed',
  names.flatMap((n, i) => [{ label: n + ' p50', colour: i }, { label: n + ' p99', colour: i, dash: [6, 4] }]),
  [t, ...names.flatMap((n) => [tl.map((p) => p.measures[n]?.p50 ?? null), tl.map((p) => p.measures[n]?.p99 ?? null)])],
  ['ms']);
chart('throughput', 'Operations per second and users running',
  [{ label: 'operations/s' }, { label: 'users running', scale: 'y2' }],
  [t, tl.map((p) => Object.entries(p.measures).reduce((a, [n, m]) => a + (n === 'connect' ? 0 : m.count), 0)), tl.map((p) => p.active)],
  ['operations/s', 'users']);
chart('errors', 'Errors per second', [{ label: 'errors', colour: 2 }], [t, tl.map((p) => p.errors)], ['errors/s']);
if (report.server) {
  const s = report.server.samples;
  chart('server', 'Server CPU (% of a core) and memory (RSS MB)',
    [{ label: 'CPU %' }, { label: 'RSS MB', scale: 'y2' }],
    [s.map((x) => x.t), s.map((x) => x.cpuPercent), s.map((x) => x.rssMb)], ['CPU %', 'MB']);
}
`;

export function htmlReport(report: LoadReport): string {
  const uplotJs = readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js'), 'utf8');
  const uplotCss = readFileSync(require.resolve('uplot/dist/uPlot.min.css'), 'utf8');
  const { users, traffic } = report;
  const facts: string[][] = [
    ['scenario', `${report.scenario.name}: ${report.scenario.description}`],
    ['server URL', report.url],
    ['shape', shapeText(report.shape)],
    ['think time', `${report.shape.thinkMs} ms`],
    ['client', report.client],
    ['duration', `${report.seconds.toFixed(1)} s${report.interrupted ? ` (${INTERRUPTED})` : ''}`],
    ['users', `${users.started} started of ${users.planned}; ${users.completed} completed, ${users.failed} failed, ${users.aborted} stopped; at most ${users.maxActive} at once`],
    ['throughput', `${fmt(report.rates.operationsPerSecond)} operations/s${report.rates.subscriptionsPerMinute === undefined ? '' : `, ${fmt(report.rates.subscriptionsPerMinute, 0)} subscriptions/min`}`],
    ['traffic', `in ${traffic.messagesIn} messages, ${(traffic.bytesIn / 1e6).toFixed(1)} MB; out ${traffic.messagesOut} messages, ${(traffic.bytesOut / 1e6).toFixed(1)} MB`],
    ['generator CPU', `${fmt(report.generatorCpuSeconds, 2)} s (${fmt((100 * report.generatorCpuSeconds) / report.seconds)} % of a core)`],
  ];
  for (const line of report.lostGenerators ?? []) facts.push(['warning', line]);
  if (report.server) facts.push(['server', serverText(report.server)]);
  facts.push(['run', `${report.date} · node ${report.node} · ${report.command}`]);
  const measures = Object.entries(report.measures).map(([name, s]) => [name, String(s.count), fmt(s.p50), fmt(s.p95), fmt(s.p99), fmt(s.max), fmt(s.mean)]);
  const errors = Object.entries(report.errors).map(([k, n]) => [k, String(n)]);
  // </script> inside the JSON would end the data block early.
  const data = JSON.stringify(report).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>perseid load · ${escapeHtml(report.scenario.name)}</title>
<style>${uplotCss}
body{font-family:system-ui,sans-serif;margin:20px;color:#1d2330;background:#fff}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0}td,th{padding:.3rem .8rem;border-bottom:1px solid #e3e6ef;text-align:right}
td:first-child,th:first-child{text-align:left}.facts td{text-align:left}.chart{margin:1rem 0}
</style></head><body>
<h1>perseid load · ${escapeHtml(report.scenario.name)}</h1>
<table class="facts"><tbody>${facts.map(([k, v]) => `<tr><td>${escapeHtml(k!)}</td><td>${escapeHtml(v!)}</td></tr>`).join('')}</tbody></table>
<h2>Latency (ms)</h2>${tableHtml(['measure', 'count', 'p50', 'p95', 'p99', 'max', 'mean'], measures)}
${errors.length ? `<h2>Errors</h2>${tableHtml(['kind', 'count'], errors)}` : ''}
<h2>Over time</h2>
<div class="chart" id="latency"></div><div class="chart" id="throughput"></div><div class="chart" id="errors"></div>
${report.server ? '<div class="chart" id="server"></div>' : ''}
<script id="report-data" type="application/json">${data}</script>
<script>${uplotJs}</script>
<script>${CHARTS_SCRIPT}</script>
</body></html>
`;
}
