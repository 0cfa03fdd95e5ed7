/**
 * `perseid top`, `perseid advise` and `perseid capacity`: the dashboard's
 * figures in a terminal, read from a running server's operational endpoints
 * (`/perseid/dashboard.json`, `/perseid/advice`, `/perseid/capacity`) with the
 * admin token when one is set.
 */
import type { AdviceCost, IndexAdvice } from '../metrics/advisor.js';
import type { CapacityReport } from '../metrics/capacity.js';
import type { DashboardView } from '../metrics/dashboard-view.js';
import { SERVER_HEADER } from '../server/connection-router.js';
import { integerOption, UsageError, type CommandSpec, type OptionSpec, type Parsed } from './args.js';
import { StartupError } from './startup-error.js';

const common: Record<string, OptionSpec> = {
  url: { type: 'string', env: 'PERSEID_URL', default: 'http://127.0.0.1:3000', value: '<url>', help: 'The server (or a workers\' primary, or its --admin-port)' },
  token: { type: 'string', env: 'PERSEID_ADMIN_TOKEN', value: '<token>', help: 'The admin token, when the server requires one' },
  json: { type: 'boolean', help: 'Print the figures as JSON' },
};

export const topCommand: CommandSpec = {
  name: 'top',
  summary: 'Show a running server\'s methods, publications, live queries, process, slowest calls, errors, advice and capacity, refreshed.',
  usage: 'perseid top [--url <url>] [options]',
  options: {
    ...common,
    interval: { type: 'string', default: '2000', value: '<ms>', help: 'Refresh every this many milliseconds' },
    once: { type: 'boolean', help: 'Print once and exit' },
  },
  details:
    'Ctrl-C stops. The figures are those of /perseid/dashboard (recent window: the last 30 to 60 s): of the server read, all its workers together;\n' +
    "in a cluster, that server's alone (named at the top), with every server's load under Servers.",
};

export const adviseCommand: CommandSpec = {
  name: 'advise',
  summary: 'Print the index advice of a running server: the createIndexAsync lines to run for the queries that scan, and indexes a longer one covers.',
  usage: 'perseid advise [--url <url>] [options]',
  options: common,
};

export const capacityCommand: CommandSpec = {
  name: 'capacity',
  summary: 'Print a running server\'s CPU and memory per 100 sessions (and users), its event-loop headroom, and the instances N sessions need.',
  usage: 'perseid capacity [--url <url>] [--sessions <n>] [options]',
  options: {
    ...common,
    sessions: { type: 'string', value: '<n>', help: 'Plan for this many sessions: how many instances they need (without it, only the figures measured)' },
    cpu: { type: 'string', default: '70', value: '<percent>', help: 'CPU each instance may run at, percent of one core' },
    memory: { type: 'string', value: '<MiB>', help: 'Memory each instance may use' },
  },
  details: 'Measure under real traffic (or `perseid load`): with no session open there is nothing to divide by.',
};

/** How long a command waits for the server's answer. */
const ANSWER_MS = 10_000;

/** Whether an answer has what a command reads; a server of another version (or not Perseid at all) may lack it. */
type Expected = (body: unknown) => boolean;

const objectWith = (...keys: string[]): Expected => (body) => typeof body === 'object' && body !== null && !Array.isArray(body) && keys.every((k) => k in body);
const dashboardFields = objectWith('at', 'processes', 'servers', 'traffic', 'methods', 'publications', 'liveQueries', 'traces', 'errors', 'advice', 'capacity');
const capacityFields = objectWith('sessions', 'users', 'processes', 'cpuPer100Sessions', 'eventLoopHeadroomPercent', 'lagP99Ms');
const adviceFields: Expected = (body) => Array.isArray(body) && body.every((a) => objectWith('line', 'reason', 'shapes')(a));

/** The dashboard's own address, which `perseid start` logs and a browser shows, names the server too. */
const DASHBOARD_PATH = /\/perseid\/dashboard\/*$/;

/** An answer, and the server that gave it when it is a cluster's member. */
interface Answer<T> {
  body: T;
  server: string | undefined;
}

async function fetchJson<T>(parsed: Parsed, path: string, expected: Expected): Promise<Answer<T>> {
  const base = String(parsed.values.url).replace(/\/+$/, '').replace(DASHBOARD_PATH, '');
  let url: URL;
  try {
    url = new URL(base + path);
  } catch {
    throw new UsageError(`--url must be an http(s) URL (got ${base})`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`--url must be an http(s) URL (got ${base})`);
  const token = parsed.values.token as string | undefined;
  let res: Response;
  try {
    res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal: AbortSignal.timeout(ANSWER_MS) });
  } catch (error) {
    // Reached but silent is not down: during an incident, a blocked event loop answers nothing.
    if ((error as Error).name === 'TimeoutError') throw new StartupError(`${url.origin} did not answer in ${ANSWER_MS / 1000} s: the server is up but busy (its event loop blocked?), or it is not a Perseid server`);
    const cause = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message;
    throw new StartupError(`cannot reach ${url.origin} (${cause}): is the server running there? (--url)`);
  }
  if (res.status === 401) {
    throw new StartupError(
      token
        ? `${url.origin} refused the admin token given (--token or PERSEID_ADMIN_TOKEN): give the server's PERSEID_ADMIN_TOKEN`
        : `${url.origin} wants its admin token: pass --token or set PERSEID_ADMIN_TOKEN`,
    );
  }
  if (res.status === 403) throw new StartupError(`${url.origin} answers its operational endpoints to loopback only: run this on the server's machine, or set PERSEID_ADMIN_TOKEN on both sides`);
  // The address asked, path prefix included: a --url with a path of its own is read below that path.
  const asked = url.origin + url.pathname;
  if (res.status === 404) throw new StartupError(`${asked} is not found: is it a Perseid server (with --admin-port, use that port)?`);
  if (!res.ok) throw new StartupError(`${asked} answered ${res.status}: ${(await res.text()).trim()}`);
  let body: unknown;
  try {
    body = JSON.parse(await res.text());
  } catch {
    body = undefined;
  }
  if (!expected(body)) throw new StartupError(`${asked} did not answer the figures this perseid reads: is it a Perseid server, of this version (use the perseid the server runs)?`);
  return { body: body as T, server: res.headers.get(SERVER_HEADER) ?? undefined };
}

const f = (v: number | null | undefined, digits = 1) => (v === null || v === undefined || Number.isNaN(v) ? '–' : v.toFixed(digits));

function table(head: string[], rows: Array<Array<string | number>>): string[] {
  const cells = [head, ...rows.map((r) => r.map(String))];
  const widths = head.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells.map((r) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  '));
}

/** A call's breakdown as a bar of `width` characters: w(ait) d(b) a(sync) c(ompute). */
function bar(parts: Record<string, number>, total: number, width = 20): string {
  let out = '';
  for (const [part, char] of [['wait', 'w'], ['db', 'd'], ['async', 'a'], ['compute', 'c']] as const) out += char.repeat(Math.round(((parts[part] ?? 0) / Math.max(total, 0.001)) * width));
  return out.padEnd(width, ' ').slice(0, width);
}

/** Says that a cluster's member answered for itself (`what` it measured), not for the cluster. */
function clusterMemberLines(server: string | undefined, what: string): string[] {
  return server === undefined ? [] : [`Server ${server} of a cluster: from ${what}, not the other servers' (ask each).`];
}

export function capacityLines(c: CapacityReport): string[] {
  const lines = [
    `${c.sessions} sessions, ${c.users} users over ${c.processes} process(es); event-loop headroom ${f(c.eventLoopHeadroomPercent, 0)} %, delay p99 ${f(c.lagP99Ms)} ms`,
    `per 100 sessions: ${f(c.cpuPer100Sessions)} % CPU, ${f(c.memoryMbPer100Sessions)} MB; per 100 users: ${f(c.cpuPer100Users)} % CPU, ${f(c.memoryMbPer100Users)} MB`,
  ];
  if (c.plan) {
    lines.push(
      c.plan.instances === null
        ? `${c.plan.sessions} sessions: unknown (nothing measured yet)`
        : `${c.plan.sessions} sessions at ${c.plan.cpuPercent} % CPU need ${c.plan.instances} instance(s) (by CPU ${c.plan.byCpu}${c.plan.byMemory !== undefined ? `, by memory ${c.plan.byMemory ?? '–'}` : ''}; ${c.plan.sessionsPerInstance ?? '–'} sessions each)`,
    );
  }
  if (c.note) lines.push(c.note);
  return lines;
}

/** Documents examined per second, or that the database did not say (no plan, or one without counts). */
function examinedText(cost: AdviceCost): string {
  return cost.docsExaminedPerSecond === null ? 'documents examined not reported by the database' : `${f(cost.docsExaminedPerSecond, 0)} docs examined/s`;
}

export function adviceLines(advice: IndexAdvice[]): string[] {
  if (advice.length === 0) return ['No index advice: no query shape seen so far scans.'];
  return advice.flatMap((a) => [
    a.line,
    `  // ${a.reason}${a.shapes.length ? `: ${a.shapes.join('; ')}` : ''}`,
    ...(a.cost ? [`  // ${a.cost.ops} ops, ${examinedText(a.cost)}, ${f(a.cost.avgMs, 2)} ms avg`] : []),
  ]);
}

/** Which worker a trace or an error comes from, on a workers' primary. */
const onWorkerText = (item: { worker?: string }) => (item.worker === undefined ? '' : ` (worker ${item.worker})`);

export function topScreen(v: DashboardView): string {
  const out: string[] = [`perseid top · ${v.server === undefined ? '' : `server ${v.server} · `}${new Date(v.at).toLocaleTimeString()} · ${v.processes.length} process(es)`, ''];
  out.push(...table(['process', 'CPU %', 'RSS MB', 'heap MB', 'delay p99 ms', 'delay max ms (1 min)', 'loop busy %', 'GC ms', 'sessions'], v.processes.map((p) => [p.worker === 'primary' ? 'primary' : p.worker ? `worker ${p.worker}` : `pid ${p.pid}`, f(p.cpu), f(p.rssMb, 0), f(p.heapMb, 0), f(p.lagP99), f(p.lagMax), f(100 * p.utilization, 0), f(p.gcMs), p.sessions])));
  if (v.servers.length) {
    // In a cluster, every table but this one is the server read, not the cluster: say so, and which row it is.
    out.push('', v.server === undefined ? 'Servers' : `Servers (the cluster, as its registry last heard; the other tables are server ${v.server}'s alone)`);
    out.push(...table(['server', 'sessions', 'CPU %', 'delay ms', 'RSS MB', 'methods/s', 'p95 ms'], v.servers.map((s) => [s.server === v.server ? `${s.server} (this one)` : s.server, s.sessions, f(s.cpuPercent), f(s.lagMs), f(s.memoryMb, 0), f(s.methodsPerSec), f(s.methodP95Ms)])));
  }
  out.push('', 'Methods (/s and percentiles: the last 30 to 60 s; calls, errors and mean ms of wait to waitedOn: since start)');
  out.push(...table(['method', 'calls', 'errors', '/s', 'p50', 'p95', 'p99', 'wait', 'db', 'async', 'compute', 'waitedOn'], v.methods.slice(0, 15).map((m) => [m.name, m.calls, m.errors, f(m.rate, 2), f(m.p50), f(m.p95), f(m.p99), f(m.breakdown.wait), f(m.breakdown.db), f(m.breakdown.async), f(m.breakdown.compute), f(m.breakdown.waitedOn)])));
  out.push('', 'Publications');
  out.push(
    ...table(
      ['publication', 'subs', 'active', 'errors', '/s', 'ready p50', 'ready p95', 'initial docs', 'initial KB', 'live docs', 'live KB', 'reuse %'],
      v.publications.slice(0, 10).map((p) => [p.name, p.subs, p.active, p.errors, f(p.rate, 2), f(p.readyP50), f(p.readyP95), p.initialDocs, f(p.initialBytes / 1024), p.liveDocs, f(p.liveBytes / 1024), f(100 * p.observerReuse, 0)]),
    ),
  );
  const lq = v.liveQueries;
  const counts = (o: Record<string, number>) => Object.entries(o).map(([k, n]) => `${k} ${n}`).join(', ') || 'none';
  out.push('', `Live queries: ${lq.active} active (${counts(lq.byStrategy)}; by source ${counts(lq.bySource)}), ${lq.created} created, ${lq.reused} reused (${f(100 * lq.reuseRatio, 0)} %), ${lq.docsRead} documents read, ${lq.requeries} re-queries`);
  const tr = v.traffic;
  out.push(
    `Traffic: new sessions ${counts(tr.sessionsOpened)}; in ${tr.messagesIn} messages, ${f(tr.charactersIn / 1024)} KB; out ${tr.messagesOut} messages, ${f(tr.bytesOut / 1024)} KB; compression ${tr.compressionRatio === null ? 'none' : `${f(100 * tr.compressionRatio, 0)} % of the original`}`,
  );
  out.push('', 'Slowest calls [w=wait d=db a=async c=compute]');
  out.push(...table(['call', 'total ms', 'breakdown', 'waitedOn'], v.traces.slice(0, 8).map((t) => [`${t.kind} ${t.name}${onWorkerText(t)}`, f(t.total), `[${bar(t as unknown as Record<string, number>, t.total)}]`, f(t.waitedOn)])));
  if (v.errors.length) {
    out.push('', 'Recent errors');
    for (const e of v.errors.slice(0, 5)) out.push(`  ${e.count}× ${e.kind} ${e.name}${onWorkerText(e)}: ${e.message}`);
  }
  out.push('', 'Index advice', ...adviceLines(v.advice).slice(0, 9).map((l) => `  ${l}`));
  out.push('', 'Capacity', ...capacityLines(v.capacity).map((l) => `  ${l}`));
  const jobs = v.jobs as { jobs?: Array<{ job: string; runs: number; failed: number; avgMs: number | null; nextRunAt?: string; lastError?: string; lastFailedAt?: string }> } | undefined;
  if (jobs?.jobs?.length) {
    out.push('', 'Jobs');
    out.push(...table(['job', 'runs', 'failed', 'avg ms', 'next run', 'last failure'], jobs.jobs.map((j) => [j.job, j.runs, j.failed, f(j.avgMs, 0), j.nextRunAt ?? '–', j.lastFailedAt ? `${j.lastFailedAt} ${j.lastError}` : ''])));
  }
  return out.join('\n');
}

export async function runTop(parsed: Parsed): Promise<number> {
  const interval = integerOption(parsed.values, 'interval', 200, 3600000)!;
  for (;;) {
    const { body: view } = await fetchJson<DashboardView>(parsed, '/perseid/dashboard.json', dashboardFields);
    if (parsed.values.json) process.stdout.write(JSON.stringify(view) + '\n');
    else process.stdout.write((process.stdout.isTTY && !parsed.values.once ? '\x1b[2J\x1b[H' : '') + topScreen(view) + '\n');
    if (parsed.values.once) return 0;
    await new Promise((r) => setTimeout(r, interval));
  }
}

export async function runAdvise(parsed: Parsed): Promise<number> {
  const { body: advice, server } = await fetchJson<IndexAdvice[]>(parsed, '/perseid/advice', adviceFields);
  const lines = [...clusterMemberLines(server, 'the queries it ran'), ...adviceLines(advice)];
  process.stdout.write((parsed.values.json ? JSON.stringify(advice, null, 2) : lines.join('\n')) + '\n');
  return 0;
}

export async function runCapacity(parsed: Parsed): Promise<number> {
  const query = new URLSearchParams();
  if (parsed.values.sessions !== undefined) query.set('sessions', String(integerOption(parsed.values, 'sessions', 1, 1e9)));
  const cpu = Number(parsed.values.cpu);
  if (!(cpu > 0)) throw new UsageError(`--cpu must be a positive percentage of one core (got ${String(parsed.values.cpu)})`);
  query.set('cpu', String(cpu));
  if (parsed.values.memory !== undefined) query.set('memory', String(integerOption(parsed.values, 'memory', 1, 1e9)));
  if (parsed.values.sessions === undefined) query.delete('cpu');
  const { body: report, server } = await fetchJson<CapacityReport>(parsed, `/perseid/capacity${query.size ? `?${query}` : ''}`, capacityFields);
  const lines = [...clusterMemberLines(server, 'its sessions and processes'), ...capacityLines(report)];
  process.stdout.write((parsed.values.json ? JSON.stringify(report, null, 2) : lines.join('\n')) + '\n');
  return 0;
}
