/**
 * Plain HTTP next to DDP: a health endpoint, the browser build of the client,
 * and the application's static files.
 */
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import serveStatic from 'serve-static';
import { metrics } from '../metrics/registry.js';
import { pathOf } from '../transport/paths.js';

export interface HealthReport {
  status: 'ok' | 'draining';
  /** `web`, `jobs` or `all` (see ServerOptions.role). */
  role: string;
  sessions: number;
  uptimeSeconds: number;
}

const CLIENT_BUNDLE = new URL('../../browser/perseid-client.js', import.meta.url);

function notFound(res: ServerResponse): void {
  res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
  res.end('Not found\n');
}

export class HttpRoutes {
  private readonly serveFiles: ReturnType<typeof serveStatic> | undefined;
  private clientBundle: Promise<Buffer> | undefined;

  constructor(
    readonly publicDir: string | undefined,
    private readonly health: () => HealthReport,
  ) {
    this.serveFiles = publicDir ? serveStatic(publicDir, { index: ['index.html'] }) : undefined;
  }

  get hasPublicDir(): boolean {
    return this.publicDir !== undefined;
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    const path = pathOf(req.url);
    if (path === '/health') {
      const report = this.health();
      res.writeHead(report.status === 'ok' ? 200 : 503, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(JSON.stringify(report));
      return;
    }
    if (path === '/perseid/stats') {
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
