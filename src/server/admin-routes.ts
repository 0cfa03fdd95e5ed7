/**
 * The APM's HTTP endpoints, all behind the admin check (admin-access.ts):
 * `/metrics` (Prometheus text), `/perseid/apm` (this process's figures as
 * JSON: what a primary collects from its workers and the CLIs read),
 * `/perseid/dashboard` (the live page) and its `/perseid/dashboard.json`,
 * `/perseid/advice` (index advice) and `/perseid/capacity?sessions=N&cpu=X`.
 * Where the figures come from is a source: this process, or a primary's
 * workers (cluster/primary.ts), so one scrape covers a machine.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { adviceFor, apm, capacityFor, type ApmSnapshot } from '../metrics/apm.js';
import type { CapacityTarget } from '../metrics/capacity.js';
import { dashboardPage } from '../metrics/dashboard-page.js';
import { dashboardView } from '../metrics/dashboard-view.js';
import { PROMETHEUS_CONTENT_TYPE, prometheusText } from '../metrics/prometheus.js';
import { adminRefusal, guardAdmin, type AdminAccess } from './admin-access.js';
import { SERVER_HEADER } from './connection-router.js';

/** Where the figures come from. */
export type ApmSource = () => Promise<ApmSnapshot>;

export const localApm: ApmSource = () => apm.snapshot();

const PATHS = new Set(['/metrics', '/perseid/apm', '/perseid/dashboard', '/perseid/dashboard.json', '/perseid/advice', '/perseid/capacity']);

export function isAdminPath(path: string): boolean {
  return PATHS.has(path);
}

/** `?sessions=N&cpu=X&memory=M` as a capacity target; a one-line error for a bad value. */
export function capacityTarget(query: URLSearchParams): CapacityTarget | string | undefined {
  const sessions = query.get('sessions');
  if (sessions === null) return undefined;
  const target: CapacityTarget = { sessions: Number(sessions) };
  if (!Number.isInteger(target.sessions) || target.sessions <= 0) return 'sessions must be a positive whole number';
  const cpu = query.get('cpu');
  if (cpu !== null) {
    target.cpuPercent = Number(cpu);
    if (!(target.cpuPercent > 0)) return 'cpu must be a positive percentage of one core';
  }
  const memory = query.get('memory');
  if (memory !== null) {
    target.memoryMb = Number(memory);
    if (!(target.memoryMb > 0)) return 'memory must be a positive number of MiB';
  }
  return target;
}

/** Answers an admin path (see isAdminPath). */
export function handleAdmin(path: string, req: IncomingMessage, res: ServerResponse, access: AdminAccess, source: ApmSource): void {
  if (path === '/perseid/dashboard') {
    // The page holds no figures; refused (401) it still comes with its token form, so a browser can log in.
    const refusal = adminRefusal(req, access);
    if (refusal?.status === 403) {
      guardAdmin(req, res, access);
      return;
    }
    const nonce = randomBytes(16).toString('base64');
    res.writeHead(refusal ? 401 : 200, {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      'content-security-policy': `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'`,
      'x-frame-options': 'DENY',
    });
    res.end(dashboardPage(nonce));
    return;
  }
  if (!guardAdmin(req, res, access)) return;
  const query = new URL(req.url ?? '/', 'http://x').searchParams;
  const target = capacityTarget(query);
  if (typeof target === 'string') {
    res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' });
    res.end(target + '\n');
    return;
  }
  sharedAnswer(source, req.url ?? path, async () => {
    const snapshot = await source();
    if (path === '/metrics') return { type: PROMETHEUS_CONTENT_TYPE, body: await prometheusText(snapshot.reports, snapshot) };
    const figures =
      path === '/perseid/apm' ? snapshot
      : path === '/perseid/dashboard.json' ? dashboardView(snapshot, target)
      : path === '/perseid/advice' ? adviceFor(snapshot)
      : capacityFor(snapshot, target);
    return { type: 'application/json', body: JSON.stringify(figures), server: snapshot.server };
  }).then(
    ({ type, body, server }) => {
      res.writeHead(200, { 'content-type': type, 'cache-control': 'no-store', ...(server === undefined ? {} : { [SERVER_HEADER]: server }) });
      res.end(body);
    },
    (error: unknown) => {
      res.writeHead(502, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(`Could not collect the figures: ${error instanceof Error ? error.message : String(error)}\n`);
    },
  );
}

interface Answer {
  type: string;
  body: string;
  /** The cluster member that answered, for the JSON answers (perseid advise and capacity name it). */
  server?: string;
}

/** Answers being built, per source and URL. */
const building = new WeakMap<ApmSource, Map<string, Promise<Answer>>>();

/**
 * One answer for every request of the same URL while it is being built: each scrape collected and rendered the
 * figures for itself (a workers' primary asking every worker each time), so 3,000 concurrent scrapes of /metrics
 * took a primary from 94 to 380 MB and a client's first call 5 s.
 */
function sharedAnswer(source: ApmSource, url: string, build: () => Promise<Answer>): Promise<Answer> {
  let answers = building.get(source);
  if (!answers) building.set(source, (answers = new Map()));
  let answer = answers.get(url);
  if (!answer) {
    answer = build().finally(() => answers.delete(url));
    answers.set(url, answer);
  }
  return answer;
}
