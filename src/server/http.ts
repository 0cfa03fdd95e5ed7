/**
 * Plain HTTP next to DDP: a health endpoint, the counters (for operators
 * only, see admin-access.ts), the browser build of the client, and the
 * application's static files, which browsers may not sniff into another type
 * and which carry a Content-Security-Policy.
 */
import { readFile } from 'node:fs/promises';
import { validateHeaderValue, type IncomingMessage, type ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import serveStatic from 'serve-static';
import { metrics } from '../metrics/registry.js';
import { pathOf } from '../transport/paths.js';
import { adminAccessFromEnv, guardAdmin, type AdminAccess } from './admin-access.js';
import { handleAdmin, isAdminPath, localApm, type ApmSource } from './admin-routes.js';

/**
 * Pages load scripts only from the server itself (an inline script needs a
 * file of its own, or a policy of the app's), styles from it, https or inline,
 * images from it or data: URLs; they connect (DDP, fetch) to it, and to the
 * other servers of its cluster (added per response); no plugins, no <base>
 * elsewhere, forms post home, only the site itself may frame them. Helmet's
 * default, near enough.
 */
export const DEFAULT_CONTENT_SECURITY_POLICY =
  "default-src 'self'; base-uri 'self'; connect-src 'self'; font-src 'self' https: data:; form-action 'self'; frame-ancestors 'self'; " +
  "img-src 'self' data:; object-src 'none'; script-src 'self'; script-src-attr 'none'; style-src 'self' https: 'unsafe-inline'";

/**
 * `policy` if a header can carry it, else a TypeError saying why: checked when the server is made, since
 * setHeader throws at the first page request, which would stop the server (a YAML literal block keeps its newlines).
 */
export function checkContentSecurityPolicy(policy: string): string {
  try {
    validateHeaderValue('content-security-policy', policy);
  } catch {
    throw new TypeError('The Content-Security-Policy must be one line, without a newline or other control character (in YAML, a folded block: >-)');
  }
  return policy;
}

/** The default policy, its connect-src widened to the cluster's other servers (their http(s) and ws(s) URLs). */
function defaultPolicyWith(peers: readonly string[]): string {
  if (peers.length === 0) return DEFAULT_CONTENT_SECURITY_POLICY;
  const sources = peers.flatMap((origin) => [origin, origin.replace(/^http/, 'ws')]);
  return DEFAULT_CONTENT_SECURITY_POLICY.replace("connect-src 'self'", `connect-src 'self' ${sources.join(' ')}`);
}

export interface HttpOptions {
  publicDir?: string | undefined;
  health: () => HealthReport;
  /** Who may read `/perseid/stats` (default: from the environment). */
  admin?: AdminAccess;
  /** The policy sent with static files, or false for none. */
  contentSecurityPolicy?: string | false;
  /** The origins of the other servers of a cluster (see ConnectionRouter.peerOrigins). */
  peerOrigins?: () => readonly string[];
  /** Where `/metrics`, the dashboard and the other APM endpoints get their figures (default: this process). */
  apm?: ApmSource;
  /** Where `/perseid/stats` gets its figures (default: this process's). */
  stats?: StatsSource;
  /** False when another port serves the operational endpoints (`--admin-port`): then they answer 404 here. */
  adminEndpoints?: boolean;
}

export interface HealthReport {
  /** `failing`: something the server needs does not work (say, the database cannot take writes); see `reason`. */
  status: 'ok' | 'draining' | 'failing';
  reason?: string;
  /** `web`, `jobs` or `all` (see ServerOptions.role). */
  role: string;
  sessions: number;
  uptimeSeconds: number;
}

/** What `/perseid/stats` answers: every counter and gauge by name, and every section (live queries, jobs, ...). */
export type StatsSource = () => Promise<Record<string, unknown>>;

const localStats: StatsSource = async () => ({ ...metrics.snapshot(), ...metrics.describeSections() });

const CLIENT_BUNDLE = new URL('../../browser/perseid-client.js', import.meta.url);

function notFound(res: ServerResponse): void {
  res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
  res.end('Not found\n');
}

export class HttpRoutes {
  readonly publicDir: string | undefined;
  private readonly serveFiles: ReturnType<typeof serveStatic> | undefined;
  private readonly health: () => HealthReport;
  private readonly admin: AdminAccess;
  private clientBundle: Promise<Buffer> | undefined;

  constructor(readonly options: HttpOptions) {
    this.publicDir = options.publicDir;
    this.health = options.health;
    this.admin = options.admin ?? adminAccessFromEnv();
    const policy = typeof options.contentSecurityPolicy === 'string' ? checkContentSecurityPolicy(options.contentSecurityPolicy) : options.contentSecurityPolicy;
    const peers = options.peerOrigins ?? (() => []);
    this.serveFiles = this.publicDir
      ? serveStatic(this.publicDir, {
          index: ['index.html'],
          setHeaders: (res) => {
            if (policy !== false) res.setHeader('content-security-policy', policy ?? defaultPolicyWith(peers()));
          },
        })
      : undefined;
  }

  /** The same routes serving `publicDir` instead. */
  withPublicDir(publicDir: string | undefined): HttpRoutes {
    return new HttpRoutes({ ...this.options, publicDir });
  }

  get hasPublicDir(): boolean {
    return this.publicDir !== undefined;
  }

  /** Serves only the operational endpoints (an `--admin-port` server); true when `req` was one. */
  handleAdmin(req: IncomingMessage, res: ServerResponse): boolean {
    const path = pathOf(req.url);
    if (path === '/perseid/stats') {
      this.sendStats(req, res);
      return true;
    }
    if (!isAdminPath(path)) return false;
    handleAdmin(path, req, res, this.admin, this.options.apm ?? localApm);
    return true;
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    const path = pathOf(req.url);
    res.setHeader('x-content-type-options', 'nosniff');
    if (path === '/health') {
      const report = this.health();
      res.writeHead(report.status === 'ok' ? 200 : 503, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(JSON.stringify(report));
      return;
    }
    const adminHere = this.options.adminEndpoints !== false;
    if (adminHere && isAdminPath(path)) {
      handleAdmin(path, req, res, this.admin, this.options.apm ?? localApm);
      return;
    }
    if (path === '/perseid/stats' && adminHere) {
      this.sendStats(req, res);
      return;
    }
    if (path === '/perseid/client.js') {
      this.sendClientBundle(res);
      return;
    }
    if (!this.serveFiles) {
      notFound(res);
      return;
    }
    this.serveFiles(req, res, () => notFound(res));
  }

  private sendStats(req: IncomingMessage, res: ServerResponse): void {
    if (!guardAdmin(req, res, this.admin)) return;
    (this.options.stats ?? localStats)().then(
      (stats) => {
        res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
        res.end(JSON.stringify(stats));
      },
      (error: unknown) => {
        res.writeHead(502, { 'content-type': 'text/plain; charset=utf-8' });
        res.end(`Could not collect the figures: ${error instanceof Error ? error.message : String(error)}\n`);
      },
    );
  }

  private sendClientBundle(res: ServerResponse): void {
    (this.clientBundle ??= readFile(fileURLToPath(CLIENT_BUNDLE))).then(
      (body) => {
        // Any page may load it: a module script from another origin (a dev server on another port, an allowed
        // origin) is refused by the browser without this header. It is public code and sent without credentials.
        res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-cache', 'access-control-allow-origin': '*' });
        res.end(body);
      },
      () => {
        this.clientBundle = undefined;
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
        res.end('The browser client is not built: run `npm run build`\n');
      },
    );
  }
}

/**
 * Connections the kernel may queue before they are accepted (Node's default is
 * 511): a storm of thousands of clients in a second would otherwise see SYNs
 * dropped and retried seconds later. The kernel caps it at net.core.somaxconn.
 */
export const LISTEN_BACKLOG = 8192;
