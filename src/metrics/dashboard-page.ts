/**
 * `/perseid/dashboard`: one page, uPlot inlined (as the load report does), that
 * polls `/perseid/dashboard.json` every 2 s and redraws: charts of the last
 * five minutes (throughput, method latency percentiles, sub ready time,
 * documents read, CPU, memory, event loop and GC, sessions), then tables
 * (methods with breakdown, publications, live queries, query shapes, the
 * slowest traces with their breakdown bars, recent errors, index advice,
 * capacity, jobs, processes). Every figure is put in with textContent, never
 * as HTML: method names and error messages come from the app and its users.
 * With an admin token the page asks for it once and sends it as a Bearer
 * token (kept in sessionStorage). Its policy runs only its own scripts (a
 * nonce per response); styles may be inline (uPlot sets them).
 */
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

const require = createRequire(import.meta.url);

const SCRIPT = String.raw`
const $ = (id) => document.getElementById(id);
const fmt = (v, d = 1) => (v === null || v === undefined || Number.isNaN(v) ? '–' : Number(v).toFixed(d));
function el(tag, props, ...children) {
  const e = document.createElement(tag);
  if (props) for (const [k, v] of Object.entries(props)) { if (k === 'style') e.style.cssText = v; else if (k === 'className') e.className = v; else e.setAttribute(k, v); }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}
function table(id, head, rows) {
  const t = el('table', null, el('thead', null, el('tr', null, ...head.map((h) => el('th', null, h)))), el('tbody', null, ...rows.map((r) => el('tr', null, ...r.map((c) => el('td', null, c))))));
  // A timeline or stack a person opened stays open through the redraw every 2 s.
  const open = new Set([...$(id).querySelectorAll('details[open]')].map((d) => d.dataset.key));
  for (const d of t.querySelectorAll('details')) if (open.has(d.dataset.key)) d.open = true;
  $(id).replaceChildren(rows.length ? t : el('p', { className: 'none' }, 'nothing yet'));
}
const COLOURS = ['#3366cc', '#dc3912', '#ff9900', '#109618', '#990099', '#0099c6'];
const charts = {};
window.perseidCharts = charts;
function chart(id, title, series, pick) {
  const h = state.history;
  const data = [h.map((p) => p.t / 1000), ...series.map((s) => h.map(s.value))];
  if (!charts[id]) {
    const opts = {
      title, width: 460, height: 200,
      series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: COLOURS[i % COLOURS.length], width: 1.5, scale: s.scale || 'y' }))],
      axes: [{}, { scale: 'y' }, ...(series.some((s) => s.scale === 'y2') ? [{ scale: 'y2', side: 1, grid: { show: false } }] : [])],
    };
    charts[id] = new uPlot(opts, data, $(id));
  } else charts[id].setData(data);
}
const PARTS = ['wait', 'db', 'async', 'compute'];
const PART_COLOURS = { wait: '#ff9900', db: '#3366cc', async: '#990099', compute: '#109618' };
function bar(trace) {
  const total = Math.max(trace.total, 0.001);
  const b = el('div', { className: 'bar', title: PARTS.map((p) => p + ' ' + fmt(trace[p]) + ' ms').join(', ') });
  for (const p of PARTS) if (trace[p] > 0) b.append(el('span', { style: 'width:' + (100 * trace[p] / total).toFixed(2) + '%;background:' + PART_COLOURS[p] }));
  return b;
}
function timeline(trace) {
  return el('details', { 'data-key': trace.kind + ' ' + trace.name + ' ' + trace.at }, el('summary', null, trace.events.length + ' events'),
    el('ol', null, ...trace.events.map((e) => el('li', null, '+' + fmt(e.at) + ' ms ' + e.type + ' ' + fmt(e.duration) + ' ms' + (e.collection ? ' ' + e.op + ' ' + e.collection : '') + (e.shape ? ' ' + e.shape : '') + (e.docs !== undefined ? ' (' + e.docs + ' docs)' : '') + (e.message ? ' ' + e.message : '')))));
}
// Which worker a trace or an error comes from, on a workers' primary.
const onWorker = (item) => (item.worker === undefined ? '' : ' (worker ' + item.worker + ')');
const state = { history: [] };
let token = sessionStorage.getItem('perseid-admin-token') || '';
async function refresh() {
  const res = await fetch('dashboard.json' + location.search, { headers: token ? { authorization: 'Bearer ' + token } : {}, cache: 'no-store' });
  if (res.status === 401 || res.status === 403) {
    $('login').hidden = false;
    $('status').textContent = 'The server wants its admin token (PERSEID_ADMIN_TOKEN).';
    return;
  }
  if (!res.ok) throw new Error('dashboard.json answered ' + res.status);
  $('login').hidden = true;
  const v = await res.json();
  Object.assign(state, v);
  $('status').textContent = (v.server === undefined ? '' : 'server ' + v.server + ' (its own figures; every server\'s load under Servers) · ') + 'updated ' + new Date(v.at).toLocaleTimeString() + ' · ' + v.processes.length + ' process' + (v.processes.length > 1 ? 'es' : '');
  chart('c-throughput', 'Throughput (per second)', [{ label: 'methods', value: (p) => p.methodsPerSec }, { label: 'subs', value: (p) => p.subsPerSec }, { label: 'messages in', value: (p) => p.messagesInPerSec }]);
  chart('c-latency', 'Method time (ms)', [{ label: 'p50', value: (p) => p.methodP50 }, { label: 'p95', value: (p) => p.methodP95 }, { label: 'p99', value: (p) => p.methodP99 }]);
  chart('c-ready', 'Sub ready p95 (ms) and documents read by live queries (/s)', [{ label: 'ready p95 ms', value: (p) => p.readyP95 }, { label: 'docs read/s', value: (p) => p.docsReadPerSec, scale: 'y2' }]);
  chart('c-cpu', 'CPU (% of a core) and sessions', [{ label: 'CPU %', value: (p) => p.cpu }, { label: 'sessions', value: (p) => p.sessions, scale: 'y2' }]);
  chart('c-memory', 'Memory (MB)', [{ label: 'RSS', value: (p) => p.rssMb }, { label: 'heap used', value: (p) => p.heapMb }]);
  chart('c-loop', 'Event loop delay p99 and max, GC pauses (ms per sample)', [{ label: 'delay p99', value: (p) => p.lagP99 }, { label: 'delay max', value: (p) => p.lagMax }, { label: 'GC', value: (p) => p.gcMs }]);
  table('t-methods', ['method', 'calls', 'errors', 'calls/s', 'p50 ms', 'p95 ms', 'p99 ms', 'wait', 'db', 'async', 'compute', 'waitedOn'],
    v.methods.map((m) => [m.name, m.calls, m.errors, fmt(m.rate, 2), fmt(m.p50), fmt(m.p95), fmt(m.p99), fmt(m.breakdown.wait), fmt(m.breakdown.db), fmt(m.breakdown.async), fmt(m.breakdown.compute), fmt(m.breakdown.waitedOn)]));
  table('t-pubs', ['publication', 'subs', 'active', 'errors', 'subs/s', 'ready p50 ms', 'ready p95 ms', 'initial docs', 'initial KB', 'live docs', 'live KB', 'observer reuse'],
    v.publications.map((p) => [p.name, p.subs, p.active, p.errors, fmt(p.rate, 2), fmt(p.readyP50), fmt(p.readyP95), p.initialDocs, fmt(p.initialBytes / 1024), p.liveDocs, fmt(p.liveBytes / 1024), fmt(100 * p.observerReuse, 0) + ' %']));
  const lq = v.liveQueries;
  const counts = (o) => Object.entries(o).map(([k, n]) => k + ' ' + n).join(', ') || '–';
  table('t-live', ['created', 'reused', 'reuse ratio', 'active', 'by strategy', 'by change source', 'documents read', 're-queries'],
    [[lq.created, lq.reused, fmt(100 * lq.reuseRatio, 0) + ' %', lq.active, counts(lq.byStrategy), counts(lq.bySource), lq.docsRead, lq.requeries]]);
  const tr = v.traffic;
  table('t-traffic', ['new sessions by transport', 'messages in', 'KB in', 'messages out', 'KB out', 'compression (out / in)'],
    [[counts(tr.sessionsOpened), tr.messagesIn, fmt(tr.charactersIn / 1024), tr.messagesOut, fmt(tr.bytesOut / 1024), tr.compressionRatio === null ? 'no compressed connection' : fmt(100 * tr.compressionRatio, 0) + ' %']]);
  table('t-shapes', ['collection', 'shape', 'ops', 'avg ms', 'returned', 'examined / returned', 'plan'],
    v.shapes.map((s) => [s.collection, s.shape, s.ops, fmt(s.avgMs, 2), s.returned, fmt(s.examinedPerReturned), s.plan || '–']));
  table('t-traces', ['', 'name', 'at', 'total ms', 'breakdown', 'wait', 'db', 'async', 'compute', 'waitedOn', 'timeline'],
    v.traces.map((t) => [t.kind, t.name + onWorker(t), new Date(t.at).toLocaleTimeString(), fmt(t.total), bar(t), fmt(t.wait), fmt(t.db), fmt(t.async), fmt(t.compute), fmt(t.waitedOn), timeline(t)]));
  table('t-errors', ['where', 'message', 'count', 'last', 'stack'],
    v.errors.map((e) => [e.kind + ' ' + e.name + onWorker(e), e.message + (e.clientError ? ' (sent to the client)' : ''), e.count, new Date(e.lastAt).toLocaleTimeString(), el('details', { 'data-key': e.kind + ' ' + e.name + onWorker(e) + ' ' + e.message }, el('summary', null, 'stack'), el('pre', null, e.stack || ''))]));
  table('t-advice', ['', 'collection', 'run this', 'why', 'cost'],
    v.advice.map((a) => [a.action, a.collection, el('code', null, a.line), a.reason + (a.shapes.length ? ' — ' + a.shapes.join('; ') : ''), a.cost ? (a.cost.docsExaminedPerSecond === null ? 'documents examined not reported by the database' : fmt(a.cost.docsExaminedPerSecond, 0) + ' docs examined/s') + ', ' + fmt(a.cost.avgMs, 2) + ' ms avg over ' + a.cost.ops + ' ops' : '']));
  const c = v.capacity;
  table('t-capacity', ['sessions', 'users', 'CPU % per 100 sessions', 'MB per 100 sessions', 'CPU % per 100 users', 'MB per 100 users', 'event-loop headroom', 'plan', 'note'],
    [[c.sessions, c.users, fmt(c.cpuPer100Sessions), fmt(c.memoryMbPer100Sessions), fmt(c.cpuPer100Users), fmt(c.memoryMbPer100Users), fmt(c.eventLoopHeadroomPercent, 0) + ' %',
      c.plan ? (c.plan.instances === null ? 'unknown (no load to measure)' : c.plan.instances + ' instance(s) for ' + c.plan.sessions + ' sessions at ' + c.plan.cpuPercent + ' % CPU') : 'add ?sessions=N to plan', c.note || '']]);
  const jobs = v.jobs;
  if (jobs && jobs.jobs) table('t-jobs', ['job', 'runs', 'succeeded', 'failed', 'running', 'queued', 'avg ms', 'last run', 'next run', 'last failure'],
    jobs.jobs.map((j) => [j.job, j.runs, j.succeeded, j.failed, j.running, j.queued, fmt(j.avgMs, 0), j.lastFinishedAt ? new Date(j.lastFinishedAt).toLocaleTimeString() : '–', j.nextRunAt ? new Date(j.nextRunAt).toLocaleTimeString() : '–', j.lastFailedAt ? new Date(j.lastFailedAt).toLocaleTimeString() + ': ' + j.lastError : '']));
  else $('t-jobs').replaceChildren(el('p', { className: 'none' }, jobs && jobs.error ? 'jobs: ' + jobs.error : 'no jobs engine in this process'));
  table('t-processes', ['worker', 'pid', 'CPU %', 'RSS MB', 'heap MB', 'loop delay p99 ms', 'loop delay max ms (1 min)', 'loop busy', 'GC ms', 'sessions'],
    v.processes.map((p) => [p.worker ?? '–', p.pid, fmt(p.cpu), fmt(p.rssMb, 0), fmt(p.heapMb, 0), fmt(p.lagP99), fmt(p.lagMax), fmt(100 * p.utilization, 0) + ' %', fmt(p.gcMs), p.sessions]));
  if (v.servers.length) table('t-servers', ['server', 'sessions', 'CPU %', 'loop delay ms', 'RSS MB', 'methods/s', 'method p95 ms'],
    v.servers.map((s) => [s.server === v.server ? s.server + ' (this one)' : s.server, s.sessions, fmt(s.cpuPercent), fmt(s.lagMs), fmt(s.memoryMb, 0), fmt(s.methodsPerSec, 1), fmt(s.methodP95Ms)]));
  else $('t-servers').replaceChildren(el('p', { className: 'none' }, 'not a cluster balancer or a workers\' primary'));
}
$('login').addEventListener('submit', (e) => { e.preventDefault(); token = $('token').value.trim(); sessionStorage.setItem('perseid-admin-token', token); refresh(); });
async function loop() { try { await refresh(); } catch (error) { $('status').textContent = String(error); } setTimeout(loop, 2000); }
loop();
`;

const BODY = `
<h1>Perseid <span id="status"></span></h1>
<form id="login" hidden><label>Admin token <input id="token" type="password" autocomplete="off"></label> <button>Show</button></form>
<section class="charts">
<div id="c-throughput"></div><div id="c-latency"></div><div id="c-ready"></div><div id="c-cpu"></div><div id="c-memory"></div><div id="c-loop"></div>
</section>
<h2>Methods</h2><p class="legend">calls/s and percentiles over the last 30 to 60 s; calls, errors and the mean ms per call of wait, db, async, compute and waitedOn since start</p><div id="t-methods"></div>
<h2>Publications</h2><div id="t-pubs"></div>
<h2>Live queries</h2><div id="t-live"></div>
<h2>Traffic</h2><div id="t-traffic"></div>
<h2>Slowest calls (recent minutes)</h2><p class="legend"><b style="color:#ff9900">wait</b> <b style="color:#3366cc">db</b> <b style="color:#990099">async</b> <b style="color:#109618">compute</b></p><div id="t-traces"></div>
<h2>Recent errors</h2><div id="t-errors"></div>
<h2>Index advice</h2><div id="t-advice"></div>
<h2>Query shapes</h2><div id="t-shapes"></div>
<h2>Capacity</h2><div id="t-capacity"></div>
<h2>Jobs</h2><div id="t-jobs"></div>
<h2>Processes</h2><div id="t-processes"></div>
<h2>Servers</h2><div id="t-servers"></div>
`;

const STYLE = `
body{font-family:system-ui,sans-serif;margin:16px;color:#1d2330;background:#fff}
h1{font-size:1.3rem}h1 span{font-size:.8rem;font-weight:normal;color:#667}h2{font-size:1.05rem;margin-top:1.6rem}
.charts{display:flex;flex-wrap:wrap;gap:12px}
table{border-collapse:collapse;font-size:.85rem}td,th{padding:.25rem .6rem;border-bottom:1px solid #e3e6ef;text-align:right;vertical-align:top}
td:first-child,th:first-child,td:nth-child(2){text-align:left}
.bar{display:flex;width:200px;height:12px;background:#eee}.bar span{display:block;height:100%}
.none{color:#889}pre{font-size:.75rem;text-align:left;white-space:pre-wrap;max-width:60rem}code{font-size:.8rem}
`;

let page: string | undefined;

/** The page; `nonce` lets its inline script run under the page's Content-Security-Policy. */
export function dashboardPage(nonce: string): string {
  page ??= pageTemplate();
  return page.replaceAll('__PERSEID_NONCE__', nonce);
}

function pageTemplate(): string {
  const uplotJs = readFileSync(require.resolve('uplot/dist/uPlot.iife.min.js'), 'utf8');
  const uplotCss = readFileSync(require.resolve('uplot/dist/uPlot.min.css'), 'utf8');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Perseid dashboard</title><link rel="icon" href="data:,">
<style>${uplotCss}${STYLE}</style></head><body>${BODY}
<script nonce="__PERSEID_NONCE__">${uplotJs}</script>
<script nonce="__PERSEID_NONCE__">${SCRIPT}</script>
</body></html>
`;
}
