/** The autoscaler's Prometheus endpoint: `GET /metrics` in the text format, and `GET /health`. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export async function serveMetrics(registry: Registry, port: number, host: string): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/metrics') {
      registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': registry.contentType });
          res.end(text);
        },
        (error: Error) => {
          res.writeHead(500, { 'content-type': 'text/plain' });
          res.end(`${error.message}\n`);
        },
      );
    } else if (path === '/health') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"status":"ok","role":"autoscale"}');
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('Not found: try /metrics\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  return {
    url: `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}/metrics`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
