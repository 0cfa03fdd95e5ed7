/** The summary a person reads at the end of a run. */
import type { LoadReport } from './model.js';
import { fmt, INTERRUPTED, serverText, textTable } from './text.js';

/** What to make of refused WebSocket upgrades: most often a server that speaks DDP over SockJS only. */
const UPGRADE_REFUSED =
  "upgrade refused: the server did not take a WebSocket at the URL's /websocket. perseid load speaks DDP over a plain WebSocket, " +
  'as Meteor and Perseid serve it at /websocket (not with DISABLE_WEBSOCKETS set, which leaves SockJS only); check the URL, or the server.';

export function summaryText(report: LoadReport): string {
  const { users, traffic } = report;
  const lines = [
    `${report.scenario.name}: ${report.scenario.description}`,
    `${report.url}  ${report.client} client  ${report.seconds.toFixed(1)} s${report.interrupted ? ` (${INTERRUPTED})` : ''}`,
    ...(report.lostGenerators ?? []).map((line) => `warning: ${line}`),
    '',
    `users      ${users.started} started of ${users.planned}, ${users.completed} completed, ${users.failed} failed, ${users.aborted} stopped, at most ${users.maxActive} at once`,
    `throughput ${fmt(report.rates.operationsPerSecond)} operations/s${report.rates.subscriptionsPerMinute === undefined ? '' : `, ${fmt(report.rates.subscriptionsPerMinute, 0)} subscriptions/min`}`,
    `traffic    in ${traffic.messagesIn} messages, ${(traffic.bytesIn / 1e6).toFixed(1)} MB; out ${traffic.messagesOut} messages, ${(traffic.bytesOut / 1e6).toFixed(1)} MB`,
    `generator  ${fmt(report.generatorCpuSeconds, 2)} s CPU (${fmt((100 * report.generatorCpuSeconds) / report.seconds)} % of a core)`,
  ];
  if (report.server) {
    lines.push(`server     ${serverText(report.server)}`);
  }
  lines.push('', 'latency (ms)');
  const rows = [['measure', 'count', 'p50', 'p95', 'p99', 'max', 'mean']];
  for (const [name, s] of Object.entries(report.measures)) rows.push([name, String(s.count), fmt(s.p50), fmt(s.p95), fmt(s.p99), fmt(s.max), fmt(s.mean)]);
  lines.push(textTable(rows));
  const errors = Object.entries(report.errors);
  if (errors.length) {
    lines.push('', 'errors');
    lines.push(textTable([['kind', 'count'], ...errors.map(([k, n]) => [k, String(n)])]));
    if (report.errors['upgrade refused']) lines.push(UPGRADE_REFUSED);
  }
  const counts = Object.entries(report.counts);
  if (counts.length) lines.push('', ...counts.map(([k, n]) => `${k}: ${n}`));
  return lines.join('\n');
}
