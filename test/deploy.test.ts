/**
 * deploy/ as far as this machine can check it (no Docker engine, no
 * Kubernetes): the Dockerfile through hadolint, the Compose file through
 * compose-go (Docker Compose's own loader), the Compose HAProxy config
 * through `haproxy -c`, the Kubernetes manifests through kubernetes-validate
 * (the API's schemas, strict), the Prometheus config through promtool; then
 * what the files must say for Perseid (readiness on /health, a drain before
 * stop, non-root, metrics that exist). Each tool, shown a broken file, must
 * fail, so a pass means something. Tools come from
 * scripts/deploy-tools/install.sh (run by .ci/run); a missing one skips its
 * test and says how to get it.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { parseAllDocuments, parse } from 'yaml';
import { freePort } from '../scripts/services/process.js';
import { AutoscaleMetrics } from '../src/autoscale/autoscale-metrics.js';
import { serveMetrics } from '../src/autoscale/exporter.js';
import { eventually, exited } from './processes.js';
import { needs } from './skips.js';

const TOOLS = process.env.PERSEID_DEPLOY_TOOLS ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'perseid', 'deploy-tools');
const INSTALL = 'bash scripts/deploy-tools/install.sh (.ci/run does it)';
const K8S_VERSION = '1.33.0';

function onPath(name: string): string | undefined {
  for (const dir of [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/usr/bin']) if (dir && existsSync(join(dir, name))) return join(dir, name);
  return undefined;
}

const tools = {
  hadolint: join(TOOLS, 'venv', 'bin', 'hadolint'),
  kubernetesValidate: join(TOOLS, 'venv', 'bin', 'kubernetes-validate'),
  composeCheck: join(TOOLS, 'bin', 'compose-check'),
  haproxy: onPath('haproxy'),
  promtool: onPath('promtool'),
  prometheus: onPath('prometheus'),
};
const skipUnless = (path: string | undefined, what: string, how = INSTALL): string | false => {
  if (path && existsSync(path)) return false;
  return needs(what, how);
};

function run(command: string, args: string[]): { status: number | null; output: string } {
  const result = spawnSync(command, args, { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

const scratch = mkdtempSync(join(tmpdir(), 'perseid-deploy-'));
after(() => rmSync(scratch, { recursive: true, force: true }));
/** A copy of `text` with one change, to show a tool failing on it. */
function broken(name: string, text: string, from: string | RegExp, to: string): string {
  const changed = text.replace(from, to);
  assert.notEqual(changed, text, `the broken copy of ${name} is not broken`);
  const path = join(scratch, name);
  writeFileSync(path, changed);
  return path;
}

type Manifest = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string }; spec?: Record<string, unknown>; data?: Record<string, string> };
const manifests: Array<Manifest & { file: string }> = readdirSync('deploy/kubernetes')
  .filter((f) => f.endsWith('.yaml'))
  .flatMap((file) => parseAllDocuments(readFileSync(join('deploy/kubernetes', file), 'utf8')).map((d) => ({ ...(d.toJSON() as Manifest), file })));
const find = (kind: string, name: string) => {
  const found = manifests.find((m) => m.kind === kind && m.metadata.name === name);
  assert.ok(found, `no ${kind} ${name} in deploy/kubernetes`);
  return found;
};

describe('deploy/Dockerfile', () => {
  const text = readFileSync('deploy/Dockerfile', 'utf8');

  it('passes hadolint with no finding, and hadolint fails a bad one', { skip: skipUnless(tools.hadolint, 'hadolint') }, () => {
    const ok = run(tools.hadolint, ['deploy/Dockerfile']);
    assert.equal(ok.status, 0, ok.output);
    const bad = run(tools.hadolint, [broken('Dockerfile', text, 'FROM node:22-bookworm-slim AS build', 'FROM node:latest AS build')]);
    assert.notEqual(bad.status, 0);
    assert.match(bad.output, /DL3007/);
  });

  it('builds in one stage and runs in another, as a non-root user, checking /health, running what the build made', () => {
    const stages = text.match(/^FROM /gm) ?? [];
    assert.ok(stages.length >= 2, 'not multi-stage');
    const final = text.slice(text.lastIndexOf('\nFROM '));
    assert.match(final, /^USER (?!0\b|root\b)\S+/m);
    assert.doesNotMatch(final, /npm ci|npm install|tsc/, 'the running image builds');
    assert.match(final, /^HEALTHCHECK .*\n?.*\/health/m);
    const cmd = JSON.parse(/^CMD (\[.*\])$/m.exec(final)![1]!) as string[];
    assert.deepEqual(cmd.slice(0, 3), ['node', 'dist/src/cli/main.js', 'start']);
    for (const path of cmd.filter((a) => a.startsWith('dist/'))) assert.ok(existsSync(path), `the image runs ${path}, which the build does not make`);
  });

  it('says to run it with a stop timeout that leaves the drain its time (docker stop kills after 10 s by default)', () => {
    const drainMs = Number(/PERSEID_DRAIN_MS=(\d+)/.exec(text)![1]);
    const run = /^#\s+docker run .*$/m.exec(text)?.[0] ?? '';
    const timeoutS = Number(/--stop-timeout (\d+)/.exec(run)?.[1] ?? 10);
    // Twice the window: a connection with a method running is closed once it has answered, one more window at most.
    assert.ok(timeoutS * 1000 > 2 * drainMs, `'${run.trim()}' stops it after ${timeoutS} s, the drain may take ${(2 * drainMs) / 1000} s`);
  });
});

describe('the image the Kubernetes autoscaler runs', () => {
  it('installs the Kubernetes client, which the build stage\'s prune of dev dependencies removes', () => {
    const container = (name: string) => (find('Deployment', name).spec as { template: { spec: { containers: Array<{ image: string; command?: string[] }> } } }).template.spec.containers[0]!;
    const autoscaler = container('perseid-autoscale');
    assert.ok(autoscaler.command?.includes('--kubernetes'), 'the autoscaler no longer runs the Kubernetes actuator: this check is moot');
    assert.equal(autoscaler.image, container('perseid-web').image, 'the autoscaler no longer runs the app\'s image');
    const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as { packages: Record<string, { dev?: boolean }> };
    assert.equal(lock.packages['node_modules/@kubernetes/client-node']?.dev, true, 'the client is no longer a dev dependency only: this check is moot');
    const dockerfile = readFileSync('deploy/Dockerfile', 'utf8');
    const build = dockerfile.slice(0, dockerfile.lastIndexOf('\nFROM '));
    const pruned = build.search(/npm prune --omit=dev/);
    assert.ok(pruned >= 0, 'the build stage no longer prunes dev dependencies');
    const range = (JSON.parse(readFileSync('package.json', 'utf8')) as { peerDependencies: Record<string, string> }).peerDependencies['@kubernetes/client-node']!;
    assert.ok(build.slice(pruned).includes(`npm install --no-save --omit=dev --ignore-scripts '@kubernetes/client-node@${range}'`), `the image has no @kubernetes/client-node (${range}) after the prune`);
  });
});

describe('deploy/compose.yaml', () => {
  const text = readFileSync('deploy/compose.yaml', 'utf8');
  const compose = parse(text) as { services: Record<string, { deploy?: { replicas?: number }; environment?: Record<string, string>; volumes?: string[]; profiles?: string[] }> };

  it('loads in compose-go (Docker Compose\'s own loader), which refuses a broken one', { skip: skipUnless(tools.composeCheck, 'compose-check') }, () => {
    const ok = run(tools.composeCheck, ['-f', 'deploy/compose.yaml']);
    assert.equal(ok.status, 0, ok.output);
    assert.deepEqual(ok.output.trim().split('\n').sort(), ['autoscale', 'balancer', 'jobs', 'mongo', 'perseid', 'redis']);
    const bad = run(tools.composeCheck, ['-f', broken('compose.yaml', text, 'condition: service_healthy', 'condition: when_ready')]);
    assert.notEqual(bad.status, 0);
    assert.match(bad.output, /condition/);
  });

  it('runs several servers, a jobs process, Redis, MongoDB and the balancer, whose HAProxy config is valid', { skip: skipUnless(tools.haproxy, 'haproxy', 'apt-get install haproxy') }, () => {
    assert.ok((compose.services.perseid!.deploy?.replicas ?? 1) >= 2, 'one Perseid server');
    assert.equal(compose.services.perseid!.environment?.PERSEID_ROLE, 'web');
    assert.equal(compose.services.jobs!.environment?.PERSEID_ROLE, 'jobs');
    assert.ok(compose.services.mongo && compose.services.redis);
    const mount = compose.services.balancer!.volumes!.find((v) => v.includes('haproxy.cfg'))!;
    const config = join('deploy', mount.split(':')[0]!);
    const ok = run(tools.haproxy!, ['-c', '-f', config]);
    assert.equal(ok.status, 0, ok.output);
    const bad = run(tools.haproxy!, ['-c', '-f', broken('haproxy.cfg', readFileSync(config, 'utf8'), 'balance leastconn', 'balance fewest')]);
    assert.notEqual(bad.status, 0);
  });
});

describe('deploy/kubernetes', () => {
  it(`passes kubernetes-validate --strict against Kubernetes ${K8S_VERSION}, which refuses a broken manifest`, { skip: skipUnless(tools.kubernetesValidate, 'kubernetes-validate') }, () => {
    const files = readdirSync('deploy/kubernetes').filter((f) => f.endsWith('.yaml')).map((f) => join('deploy/kubernetes', f));
    const ok = run(tools.kubernetesValidate, ['--strict', '-k', K8S_VERSION, ...files]);
    assert.equal(ok.status, 0, ok.output);
    const passed = ok.output.match(/ passed for resource /g)?.length ?? 0;
    // Every resource but KEDA's ScaledObject (a custom resource: checked below instead).
    assert.equal(passed, manifests.filter((m) => m.apiVersion !== 'keda.sh/v1alpha1').length, ok.output);
    const bad = run(tools.kubernetesValidate, ['--strict', '-k', K8S_VERSION, broken('perseid.yaml', readFileSync('deploy/kubernetes/perseid.yaml', 'utf8'), 'readinessProbe:', 'readinesProbe:')]);
    assert.notEqual(bad.status, 0, bad.output);
  });

  it('gives the web Deployment readiness on /health, a drain before stop with time for it, and a non-root user', () => {
    const web = find('Deployment', 'perseid-web');
    const pod = (web.spec!.template as { spec: Record<string, unknown> }).spec as {
      terminationGracePeriodSeconds: number;
      securityContext: { runAsNonRoot: boolean };
      containers: Array<{ readinessProbe: { httpGet: { path: string } }; lifecycle: { preStop: { exec: { command: string[] } } }; env: Array<{ name: string; value?: string }> }>;
    };
    const [container] = pod.containers;
    assert.equal(container!.readinessProbe.httpGet.path, '/health');
    assert.match(container!.lifecycle.preStop.exec.command.join(' '), /kill -TERM 1/);
    const drainMs = Number(container!.env.find((e) => e.name === 'PERSEID_DRAIN_MS')!.value);
    assert.ok(pod.terminationGracePeriodSeconds * 1000 > drainMs + 3000, 'the grace period is shorter than the drain');
    assert.equal(pod.securityContext.runAsNonRoot, true);
    assert.equal(container!.env.find((e) => e.name === 'PERSEID_ROLE')!.value, 'web');
    const jobs = find('Deployment', 'perseid-jobs');
    assert.match(JSON.stringify(jobs.spec), /"name":"PERSEID_ROLE","value":"jobs"/);
    assert.deepEqual((find('Service', 'perseid').spec!.selector as Record<string, string>)['app.kubernetes.io/component'], 'web');
    const budget = find('PodDisruptionBudget', 'perseid-web').spec as { maxUnavailable: number; selector: { matchLabels: Record<string, string> } };
    assert.equal(budget.selector.matchLabels['app.kubernetes.io/component'], 'web');
    assert.equal(budget.maxUnavailable, 1);
  });

  it('scales on metrics the autoscaler really exports: KEDA, the HPA, and Prometheus scraping it (promtool)', { skip: skipUnless(tools.promtool, 'promtool', 'apt-get install prometheus') }, async () => {
    const afterRound = new AutoscaleMetrics();
    afterRound.round([], 1, { desired: 1, direction: 'hold', reason: 'within thresholds' }, { unsettledS: 0, scaleFailures: 0 });
    const exported = new Set((await afterRound.registry.getMetricsAsJSON()).map((m) => m.name));
    const keda = find('ScaledObject', 'perseid-web');
    assert.equal((keda.spec!.scaleTargetRef as { name: string }).name, 'perseid-web');
    const trigger = (keda.spec!.triggers as Array<{ type: string; metadata: { query: string; threshold: string; serverAddress: string } }>)[0]!;
    assert.equal(trigger.type, 'prometheus');
    assert.match(trigger.metadata.threshold, /^\d+$/);
    assert.ok(exported.has(/\b(perseid_\w+)/.exec(trigger.metadata.query)![1]!), `KEDA queries ${trigger.metadata.query}`);
    const hpa = find('HorizontalPodAutoscaler', 'perseid-web');
    const metric = (hpa.spec!.metrics as Array<{ external: { metric: { name: string } } }>)[0]!.external.metric.name;
    assert.ok(exported.has(metric), `the HPA reads ${metric}`);
    const scrape = find('ConfigMap', 'prometheus-perseid').data!['prometheus.yml']!;
    const file = join(scratch, 'prometheus.yml');
    writeFileSync(file, scrape);
    const ok = run(tools.promtool!, ['check', 'config', file]);
    assert.equal(ok.status, 0, ok.output);
    const bad = run(tools.promtool!, ['check', 'config', broken('prometheus-bad.yml', scrape, 'scrape_interval: 15s', 'scrape_interval: soon')]);
    assert.notEqual(bad.status, 0);
    // What it exports, after a round with a server in it, passes promtool's lint (base units, ...).
    const metrics = new AutoscaleMetrics();
    metrics.round([{ id: 'a', url: 'http://a.test', balancer: false, sessions: 3, cpuPercent: 10, lagMs: 2, memoryMb: 80, methodP95Ms: 5, updatedAt: Date.now() }], 1, { desired: 1, direction: 'hold', reason: 'within thresholds' }, { unsettledS: 0, scaleFailures: 0 });
    const lint = spawnSync(tools.promtool!, ['check', 'metrics'], { input: await metrics.registry.metrics(), encoding: 'utf8' });
    assert.equal(lint.status, 0, `${lint.stdout}${lint.stderr}`);
    assert.match(scrape, /perseid-autoscale\.perseid\.svc:9464/);
    assert.equal((find('Service', 'perseid-autoscale').spec!.ports as Array<{ name: string }>)[0]!.name, 'metrics');
  });

  it('the shipped scrape config keeps each server\'s instance label (a real Prometheus scraping a real exporter)', { skip: skipUnless(tools.prometheus, 'prometheus', 'apt-get install prometheus') }, async () => {
    const metrics = new AutoscaleMetrics();
    metrics.round([{ id: 'web-1', url: 'http://10.0.0.1:3000', host: 'perseid-web-1', balancer: false, sessions: 7, cpuPercent: 10, lagMs: 2, memoryMb: 80, methodP95Ms: 5, updatedAt: Date.now() }], 1, { desired: 1, direction: 'hold', reason: 'within thresholds' }, { unsettledS: 0, scaleFailures: 0 });
    const exporter = await serveMetrics(metrics.registry, 0, '127.0.0.1');
    const target = new URL(exporter.url).host;
    // The shipped job as it is, aimed at this exporter and scraping every second.
    const scrape = find('ConfigMap', 'prometheus-perseid').data!['prometheus.yml']!.replace('perseid-autoscale.perseid.svc:9464', target).replaceAll('15s', '1s');
    const config = join(scratch, 'prometheus-live.yml');
    writeFileSync(config, scrape);
    const port = await freePort();
    const prometheus = spawn(tools.prometheus!, [`--config.file=${config}`, `--web.listen-address=127.0.0.1:${port}`, `--storage.tsdb.path=${join(scratch, 'tsdb')}`], { stdio: 'ignore' });
    try {
      let series: Array<{ metric: Record<string, string> }> = [];
      await eventually(async () => {
        assert.equal(prometheus.exitCode, null, 'Prometheus exited');
        // Until it is ready, Prometheus answers 503 in plain text.
        const answer = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=perseid_instance_sessions`)
          .then((r) => (r.ok ? (r.json() as Promise<{ data: { result: typeof series } }>) : undefined))
          .catch(() => undefined);
        series = answer?.data.result ?? [];
        return series.length > 0;
      }, 'Prometheus to scrape the exporter', 20_000);
      // Without honor_labels, Prometheus renames it exported_instance and puts the autoscaler's own address in instance.
      assert.equal(series[0]!.metric.instance, 'web-1', JSON.stringify(series[0]!.metric));
      assert.equal(series[0]!.metric.pod, 'perseid-web-1');
    } finally {
      prometheus.kill('SIGTERM');
      await exited(prometheus);
      await exporter.close();
    }
  });

  it('the HPA does not remove a pod when a server drops out of discovery for a round (a dry run then exports one fewer)', () => {
    const behavior = find('HorizontalPodAutoscaler', 'perseid-web').spec!.behavior as { scaleDown: { stabilizationWindowSeconds: number } };
    // An entry lives 3 announce intervals (6 s); a round (10 s), a scrape (15 s) and the HPA's sync (15 s) come on top.
    assert.ok(behavior.scaleDown.stabilizationWindowSeconds >= 60, `scale-down window ${behavior.scaleDown.stabilizationWindowSeconds} s`);
  });

  it('gives the autoscaler just the rights its Kubernetes actuator uses', () => {
    const rules = (find('Role', 'perseid-autoscale') as unknown as { rules: Array<{ resources: string[]; verbs: string[] }> }).rules;
    const can = (resource: string, verb: string) => rules.some((r) => r.resources.includes(resource) && r.verbs.includes(verb));
    assert.ok(can('deployments/scale', 'get') && can('deployments/scale', 'patch') && can('deployments', 'get') && can('pods', 'patch'));
    assert.ok(!rules.some((r) => r.verbs.includes('*') || r.verbs.includes('delete')), 'more rights than it needs');
  });
});
