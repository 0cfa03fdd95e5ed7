/**
 * A stand-in for the Kubernetes API server on loopback, speaking the real
 * paths, verbs, content types and object shapes the official client uses for
 * what the Kubernetes actuator does (read and patch a Deployment's scale,
 * read the Deployment, patch a Pod), checking the bearer token. No Kubernetes
 * can run here; this is the mock of what cannot. Plain HTTP (the kubeconfig
 * says insecure-skip-tls-verify, which the client requires for http://).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

export interface FakeDeployment {
  replicas: number;
  /** Pods ready (default: as many as replicas, at once). */
  ready?: number;
}

export interface RecordedRequest {
  method: string;
  path: string;
  contentType?: string;
  body?: unknown;
}

const TOKEN = 'perseid-test-token';

export class FakeKubernetes {
  readonly requests: RecordedRequest[] = [];
  readonly deployments = new Map<string, FakeDeployment>();
  readonly pods = new Map<string, { annotations: Record<string, string> }>();
  /** Requests refused as RBAC refuses them (403), as `METHOD path`. */
  readonly forbidden = new Set<string>();
  /** When set, requests get no answer at all (an API server that hangs). */
  stalled = false;
  private server = createServer((req, res) => void this.handle(req, res));
  url = '';

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', () => resolve()));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /** Writes a kubeconfig for this server (context namespace `namespace`); returns its path. */
  kubeconfig(dir: string, namespace: string): string {
    const path = join(dir, 'kubeconfig');
    writeFileSync(
      path,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        `- name: fake\n  cluster:\n    server: ${this.url}\n    insecure-skip-tls-verify: true`,
        'users:',
        `- name: tester\n  user:\n    token: ${TOKEN}`,
        'contexts:',
        `- name: fake\n  context:\n    cluster: fake\n    user: tester\n    namespace: ${namespace}`,
        'current-context: fake',
        '',
      ].join('\n'),
    );
    return path;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString();
    const path = (req.url ?? '/').split('?')[0]!;
    const recorded: RecordedRequest = { method: req.method!, path, contentType: req.headers['content-type'] };
    if (text) recorded.body = JSON.parse(text);
    this.requests.push(recorded);
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const failure = (code: number, reason: string, message: string) => send(code, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code });
    if (this.stalled) return;
    if (req.headers.authorization !== `Bearer ${TOKEN}`) return failure(401, 'Unauthorized', 'Unauthorized');
    if (this.forbidden.has(`${req.method} ${path}`)) {
      return failure(403, 'Forbidden', `deployments.apps is forbidden: User "system:serviceaccount:perseid-test:autoscaler" cannot ${req.method!.toLowerCase()} ${path}`);
    }
    const patching = req.method === 'PATCH';
    if (patching && recorded.contentType !== 'application/merge-patch+json') {
      return failure(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/merge-patch+json (got ${recorded.contentType})`);
    }
    let m = /^\/apis\/apps\/v1\/namespaces\/([^/]+)\/deployments\/([^/]+)(\/scale)?$/.exec(path);
    if (m) {
      const [, namespace, name, scale] = m;
      const deployment = this.deployments.get(`${namespace}/${name}`);
      if (!deployment) return failure(404, 'NotFound', `deployments.apps "${name}" not found`);
      if (patching && scale) {
        const replicas = (recorded.body as { spec?: { replicas?: unknown } }).spec?.replicas;
        if (typeof replicas !== 'number') return failure(422, 'Invalid', 'spec.replicas: Required value');
        deployment.replicas = replicas;
        deployment.ready = replicas;
      } else if (req.method !== 'GET') return failure(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
      const metadata = { name, namespace, uid: `uid-${name}`, resourceVersion: String(this.requests.length) };
      if (scale) return send(200, { kind: 'Scale', apiVersion: 'autoscaling/v1', metadata, spec: { replicas: deployment.replicas }, status: { replicas: deployment.replicas, selector: `app=${name}` } });
      const ready = deployment.ready ?? deployment.replicas;
      return send(200, {
        kind: 'Deployment',
        apiVersion: 'apps/v1',
        metadata,
        spec: { replicas: deployment.replicas, selector: { matchLabels: { app: name } }, template: { metadata: { labels: { app: name } }, spec: { containers: [{ name, image: 'perseid' }] } } },
        status: { replicas: Math.max(ready, deployment.replicas), readyReplicas: ready, updatedReplicas: ready, availableReplicas: ready },
      });
    }
    m = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)$/.exec(path);
    if (m && patching) {
      const pod = this.pods.get(`${m[1]}/${m[2]}`);
      if (!pod) return failure(404, 'NotFound', `pods "${m[2]}" not found`);
      // A JSON merge patch (RFC 7386): null removes a key.
      for (const [key, value] of Object.entries((recorded.body as { metadata?: { annotations?: Record<string, string | null> } }).metadata?.annotations ?? {})) {
        if (value === null) delete pod.annotations[key];
        else pod.annotations[key] = value;
      }
      return send(200, { kind: 'Pod', apiVersion: 'v1', metadata: { name: m[2], namespace: m[1], annotations: pod.annotations }, spec: { containers: [] }, status: { phase: 'Running' } });
    }
    return failure(404, 'NotFound', 'the server could not find the requested resource');
  }
}
