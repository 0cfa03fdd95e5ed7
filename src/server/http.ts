/**
 * Plain HTTP next to DDP: a health endpoint, the counters (for operators
 * only, see admin-access.ts), the browser build of the client, and the
 * application's static files, which browsers may not sniff into another type
 * and which carry a Content-Security-Policy.
 */
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import serveStatic from 'serve-static';
import { metrics } from '../metrics/registry.js';
import { pathOf } from '../transport/paths.js';
import { adminAccessFromEnv, guardAdmin, type AdminAccess } from './admin-access.js';

/**
 * Pages load scripts, styles, images and fonts from the server itself and
 * talk to it (DDP, fetch); nothing inline, no plugins, not framed by others.
 */
export const DEFAULT_CONTENT_SECURITY_POLICY =
  "default-src 'self'; connect-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'self'";

export interface HttpOptions {
  publicDir?: string | undefined;
  health: () => HealthReport;
  /** Who may read `/perseid/stats` (default: from the environment). */
  admin?: AdminAccess;
  /** The policy sent with static files, or false for none. */
  contentSecurityPolicy?: string | false;
}

export interface HealthReport {
  status: 'ok' | 'draining';
  sessions: number;
  uptimeSeconds: number;
}

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
    const policy = options.contentSecurityPolicy ?? DEFAULT_CONTENT_SECURITY_POLICY;
    this.serveFiles = this.publicDir
      ? serveStatic(this.publicDir, {
          index: ['index.html'],
          setHeaders: (res) => {
            if (policy) res.setHeader('content-security-policy', policy);
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

  handle(req: IncomingMessage, res: ServerResponse): void {
    const path = pathOf(req.url);
    res.setHeader('x-content-type-options', 'nosniff');
    if (path === '/health') {
      const report = this.health();
      res.writeHead(report.status === 'ok' ? 200 : 503, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(JSON.stringify(report));
      return;
    }
    if (path === '/perseid/stats') {
      if (!guardAdmin(req, res, this.admin)) return;
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(JSON.stringify({ ...metrics.snapshot(), ...metrics.describeSections() }));
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

  private sendClientBundle(res: ServerResponse): void {
    (this.clientBundle ??= readFile(fileURLToPath(CLIENT_BUNDLE))).then(
      (body) => {
        res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-cache' });
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
