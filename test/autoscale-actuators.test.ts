/**
 * The shared actuator suite (test/suites/actuator.ts) against each actuator:
 * memory (dry run), a real shell command, real local Perseid processes (on
 * mongo-java-server), and the official Kubernetes client against a fake API
 * server on loopback; then what each does beyond the suite.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { CommandActuator } from '../src/autoscale/actuator-command.js';
import { DELETION_COST, KubernetesActuator } from '../src/autoscale/actuator-kubernetes.js';
import { LocalActuator } from '../src/autoscale/actuator-local.js';
import { MemoryActuator } from '../src/autoscale/actuator-memory.js';
import { createLogger, setLogLevel } from '../src/log.js';
import { serviceUrl } from '../scripts/services/control.js';
import { freshDatabase } from './databases.js';
import { needsServices } from './skips.js';
import { FakeKubernetes } from './fake-kubernetes.js';
import { CLI, eventually, exited, spawnPerseid } from './processes.js';
import { actuatorSuite, entry } from './suites/actuator.js';

setLogLevel((process.env.PERSEID_LOG_LEVEL as never) ?? 'silent');
const log = createLogger('test');
/** Sessions per server by position: the least loaded are not simply the first or the last. */
const LOADS = [40, 5, 30, 12, 50, 3, 20, 8];

describe('memory actuator', () => {
  actuatorSuite(async () => {
    const actuator = new MemoryActuator(2);
    return {
      actuator,
      initial: 2,
      servers: async () => Array.from({ length: await actuator.current([]) }, (_, i) => entry(`s${i}`, LOADS[i]!)),
      drained: async () => actuator.drained,
      close: async () => undefined,
    };
  });
});

describe('command actuator', () => {
  const setup = () => {
    const dir = mkdtempSync(join(tmpdir(), 'perseid-scale-'));
    const file = join(dir, 'count');
    const count = () => (existsSync(file) ? Number(readFileSync(file, 'utf8')) : 2);
    return { dir, file, count };
  };

  actuatorSuite(async () => {
    const { dir, file, count } = setup();
    const actuator = new CommandActuator({ template: `printf '%s' {n} > '${file}'`, log });
    return {
      actuator,
      initial: 2,
      servers: async () => Array.from({ length: count() }, (_, i) => entry(`s${i}`, LOADS[i]!)),
      close: async () => rmSync(dir, { recursive: true, force: true }),
    };
  });

  it('runs the command with the count, and rejects with its output when it fails', async () => {
    const { dir, file } = setup();
    try {
      await new CommandActuator({ template: `printf '%s %s' {n} "$PERSEID_SCALE_TO" > '${file}'`, log }).scaleTo(4, []);
      assert.equal(readFileSync(file, 'utf8'), '4 4');
      const failing = new CommandActuator({ template: 'echo "no such service" >&2; exit 3 # {n}', log });
      await assert.rejects(failing.scaleTo(2, []), /the scale command exited with 3: no such service/);
      assert.equal(await failing.current([entry('a', 1)]), 1, 'a failed command changed the count');
      assert.throws(() => new CommandActuator({ template: 'scale it', log }), /must contain \{n\}/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('stops a command that runs too long, and what it started, saying so', async () => {
    const { dir, file } = setup();
    let pid = 0;
    // Killed and not yet reaped (a zombie, state Z) counts as stopped.
    const running = () => existsSync(`/proc/${pid}/stat`) && !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    try {
      const hanging = new CommandActuator({ template: `sleep 20 & echo $! > '${file}'; wait # {n}`, timeoutMs: 300, log });
      await assert.rejects(hanging.scaleTo(3, []), /the scale command did not finish within 0.3 s and was stopped/);
      assert.equal(await hanging.current([entry('a', 1)]), 1, 'a stopped command changed the count');
      pid = Number(readFileSync(file, 'utf8'));
      for (let i = 0; i < 40 && running(); i++) await new Promise((r) => setTimeout(r, 50));
      assert.equal(running(), false, 'what the command started still runs');
    } finally {
      if (pid && running()) process.kill(pid, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

const mongo = await serviceUrl('mongo-java-server');

describe('perseid autoscale --scale-command', { skip: needsServices({ 'mongo-java-server': mongo }) }, () => {
  it('stops at SIGTERM without waiting for a scale command under way, and stops the command', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'perseid-scale-'));
    const file = join(dir, 'pid');
    const database = freshDatabase(mongo!);
    // No server in the registry and --min 1: the first round runs the command, which hangs.
    const autoscale = spawnPerseid(['autoscale', '--scale-command', `sleep 20 & echo $! > '${file}'; wait # {n}`, '--discovery', 'mongo', '--interval-s', '0.2'], {
      MONGO_URL: database.url,
      REDIS_URL: '',
      PERSEID_LOG_LEVEL: 'info',
    });
    let pid = 0;
    const running = () => existsSync(`/proc/${pid}/stat`) && !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    try {
      await eventually(() => existsSync(file) && readFileSync(file, 'utf8').trim() !== '', `the scale command to run:\n${autoscale.output()}`, 10000);
      pid = Number(readFileSync(file, 'utf8'));
      const started = Date.now();
      autoscale.child.kill('SIGTERM');
      const killer = setTimeout(() => autoscale.child.kill('SIGKILL'), 10_000);
      const code = await exited(autoscale.child).finally(() => clearTimeout(killer));
      assert.ok(Date.now() - started < 5000, `it waited ${Date.now() - started} ms for the command:\n${autoscale.output()}`);
      assert.equal(code, 0, autoscale.output());
      for (let i = 0; i < 40 && running(); i++) await new Promise((r) => setTimeout(r, 50));
      assert.equal(running(), false, 'the scale command still runs');
      // It stopped the command itself: nothing failed, and nothing is retried.
      assert.doesNotMatch(autoscale.output(), /round failed; retrying/);
      assert.match(autoscale.output(), /INFO {2}\[autoscale\] stopped the scale under way: it may have been applied in part to=1\n/);
    } finally {
      if (autoscale.child.exitCode === null) autoscale.child.kill('SIGKILL');
      if (pid && running()) process.kill(pid, 'SIGKILL');
      await database.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
describe('perseid autoscale --local', { skip: needsServices({ 'mongo-java-server': mongo }) }, () => {
  it("drains its servers on a terminal's Ctrl-C (SIGINT to its process group) instead of stopping them at once", async () => {
    const database = freshDatabase(mongo!);
    // In a group of its own, as a terminal runs a command: the Ctrl-C goes to the whole group.
    const child = spawn(process.execPath, [CLI, 'autoscale', '--local', 'dist/test/fixtures/cluster-app.js', '--local-arg=--drain-ms=200', '--discovery', 'mongo', '--interval-s', '0.2'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      env: { ...process.env, MONGO_URL: database.url, REDIS_URL: '', PERSEID_LOG_LEVEL: 'info' },
    });
    let output = '';
    child.stdout!.on('data', (c: Buffer) => void (output += c.toString()));
    child.stderr!.on('data', (c: Buffer) => void (output += c.toString()));
    let server = 0;
    try {
      await eventually(() => /started a local server .*pid=\d+/.test(output), `a local server:\n${output}`, 20000);
      server = Number(/started a local server .*pid=(\d+)/.exec(output)![1]);
      process.kill(-child.pid!, 'SIGINT');
      const killer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 15_000);
      const code = await exited(child).finally(() => clearTimeout(killer));
      assert.equal(code, 0, output);
      assert.match(output, /\[perseid\] draining, then stopping signal=SIGTERM/, output);
      assert.doesNotMatch(output, /\[perseid\] stopping signal=SIGINT|second signal/, output);
      assert.match(output, /a local server drained and exited/, output);
    } finally {
      if (child.exitCode === null) process.kill(-child.pid!, 'SIGKILL');
      if (server && existsSync(`/proc/${server}`)) process.kill(server, 'SIGKILL');
      await database.drop();
    }
  });
});

// Local servers form a cluster on MongoDB.
describe('local actuator', { skip: needsServices({ 'mongo-java-server': mongo }) }, () => {
  actuatorSuite(async () => {
    const database = freshDatabase(mongo!);
    const actuator = new LocalActuator({
      app: 'dist/test/fixtures/cluster-app.js',
      args: ['--drain-ms', '200', '--discovery-interval-ms', '200', '--log-level', 'warn'],
      env: { MONGO_URL: database.url, REDIS_URL: '' },
      log,
    });
    const seen = new Set<string>();
    return {
      actuator,
      initial: 0,
      servers: async () =>
        actuator.urls.map((url, i) => {
          seen.add(url);
          return entry(url, LOADS[i]!, { url });
        }),
      drained: async () => [...seen].filter((url) => !actuator.urls.includes(url)),
      close: async () => {
        await actuator.close();
        await database.drop();
      },
    };
  });

  it('a server that dies starting counts no more: not running, not settling', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'perseid-bad-app-'));
    const app = join(dir, 'app.js');
    writeFileSync(app, "throw new Error('no config');\n");
    const database = freshDatabase(mongo!);
    const actuator = new LocalActuator({ app, args: ['--log-level', 'warn'], env: { MONGO_URL: database.url, REDIS_URL: '' }, log });
    try {
      await assert.rejects(actuator.scaleTo(1, []), /a local server exited with 1 while starting: .*no config/);
      assert.equal(await actuator.current([]), 0, 'the dead server is still counted');
      assert.equal(await actuator.settling([]), undefined, 'the dead server is still starting');
    } finally {
      await actuator.close();
      await database.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runs real servers, and a drained one is gone', async () => {
    const database = freshDatabase(mongo!);
    const actuator = new LocalActuator({ app: 'dist/test/fixtures/cluster-app.js', args: ['--drain-ms', '100', '--log-level', 'warn'], env: { MONGO_URL: database.url, REDIS_URL: '' }, log });
    try {
      await actuator.scaleTo(2, []);
      for (const url of actuator.urls) assert.equal((await fetch(`${url}/health`)).status, 200);
      const [leaving] = actuator.urls;
      await actuator.scaleTo(1, actuator.urls.map((url, i) => entry(url, i === 0 ? 0 : 9, { url })));
      assert.deepEqual(actuator.urls.includes(leaving!), false);
      let gone = false;
      for (let i = 0; i < 200 && !gone; i++) {
        gone = await fetch(`${leaving}/health`).then(() => false, () => true);
        if (!gone) await new Promise((r) => setTimeout(r, 50));
      }
      assert.ok(gone, 'the drained server still answers');
    } finally {
      await actuator.close();
      await database.drop();
    }
  });
});

describe('kubernetes actuator (official client, fake API server)', () => {
  const backend = async () => {
    const api = await new FakeKubernetes().start();
    const dir = mkdtempSync(join(tmpdir(), 'perseid-kube-'));
    process.env.KUBECONFIG = api.kubeconfig(dir, 'perseid-test');
    api.deployments.set('perseid-test/web', { replicas: 2 });
    for (let i = 0; i < 8; i++) api.pods.set(`perseid-test/pod-${i}`, { annotations: {} });
    const actuator = new KubernetesActuator({ deployment: 'web', log });
    return {
      api,
      actuator,
      close: async () => {
        await api.close();
        rmSync(dir, { recursive: true, force: true });
        delete process.env.KUBECONFIG;
      },
    };
  };

  actuatorSuite(async () => {
    const { api, actuator, close } = await backend();
    return {
      actuator,
      initial: 2,
      servers: async () => Array.from({ length: api.deployments.get('perseid-test/web')!.replicas }, (_, i) => entry(`pod-${i}`, LOADS[i]!, { host: `pod-${i}` })),
      drained: async () => [...api.pods].filter(([, pod]) => pod.annotations[DELETION_COST] !== undefined).map(([name]) => name.split('/')[1]!),
      close,
    };
  });

  it('speaks the API as the client does: bearer token, merge patches, the scale subresource; reports a rollout under way', async () => {
    const { api, actuator, close } = await backend();
    try {
      await actuator.scaleTo(1, [entry('a', 9, { host: 'pod-0' }), entry('b', 2, { host: 'pod-1' })]);
      const patches = api.requests.filter((r) => r.method === 'PATCH');
      assert.deepEqual(
        patches.map((r) => [r.path, r.contentType]),
        [
          ['/api/v1/namespaces/perseid-test/pods/pod-1', 'application/merge-patch+json'],
          ['/apis/apps/v1/namespaces/perseid-test/deployments/web/scale', 'application/merge-patch+json'],
        ],
      );
      assert.deepEqual(patches[1]!.body, { spec: { replicas: 1 } });
      assert.equal(api.pods.get('perseid-test/pod-1')!.annotations[DELETION_COST], '-1000');
      api.deployments.get('perseid-test/web')!.ready = 0;
      assert.match((await actuator.settling([]))!, /0 of 1 pods ready/);
      const missing = new KubernetesActuator({ deployment: 'nope', log });
      await assert.rejects(missing.current([]), /404|not found/i);
    } finally {
      await close();
    }
  });

  it('leaves no pod marked for removal that it does not remove now: a failed scale takes its marks back, a later scale-down an older mark', async () => {
    const { api, actuator, close } = await backend();
    const marked = () => [...api.pods].filter(([, pod]) => pod.annotations[DELETION_COST] !== undefined).map(([name]) => name.split('/')[1]);
    try {
      api.deployments.get('perseid-test/web')!.replicas = 3;
      const scale = 'PATCH /apis/apps/v1/namespaces/perseid-test/deployments/web/scale';
      api.forbidden.add(scale);
      await assert.rejects(actuator.scaleTo(2, [entry('a', 9, { host: 'pod-0' }), entry('b', 2, { host: 'pod-1' }), entry('c', 5, { host: 'pod-2' })]), /HTTP 403/);
      assert.deepEqual(marked(), [], 'a scale that failed left its mark');
      api.forbidden.delete(scale);
      await actuator.scaleTo(2, [entry('a', 9, { host: 'pod-0' }), entry('b', 2, { host: 'pod-1' }), entry('c', 5, { host: 'pod-2' })]);
      assert.deepEqual(marked(), ['pod-1']);
      // The ReplicaSet removed another pod (one not ready goes first): pod-1 stayed, and has taken the most clients since.
      await actuator.scaleTo(1, [entry('a', 9, { host: 'pod-0' }), entry('b', 40, { host: 'pod-1' })]);
      assert.deepEqual(marked(), ['pod-0']);
    } finally {
      await close();
    }
  });

  it('says in one line what Kubernetes refused and what to do, gives up on an API server that does not answer, and names a missing configuration', async () => {
    const { api, actuator, close } = await backend();
    try {
      api.forbidden.add('PATCH /apis/apps/v1/namespaces/perseid-test/deployments/web/scale');
      const refused = await actuator.scaleTo(3, []).then(() => undefined, (error: Error) => error.message);
      assert.match(refused ?? '', /^Kubernetes refused to scale deployment perseid-test\/web to 3 \(HTTP 403: deployments.apps is forbidden: User .* cannot patch .*\): give the autoscaler's service account the rights/);
      assert.doesNotMatch(refused!, /\n/);
      const kubeconfig = process.env.KUBECONFIG!;
      writeFileSync(kubeconfig, readFileSync(kubeconfig, 'utf8').replace(/token: .*/, 'token: an-expired-token'));
      const unknown = await new KubernetesActuator({ deployment: 'web', log }).current([]).then(() => undefined, (error: Error) => error.message);
      assert.equal(unknown, "Kubernetes refused to read the scale of deployment perseid-test/web (HTTP 401): it did not accept the credentials (a wrong or expired token): check KUBECONFIG's user, or the pod's service account token");
      api.stalled = true;
      const slow = new KubernetesActuator({ deployment: 'web', requestTimeoutMs: 300, log });
      const started = Date.now();
      await assert.rejects(slow.current([]), /^Error: Kubernetes did not answer within 0.3 s \(read the scale of deployment perseid-test\/web\)$/);
      assert.ok(Date.now() - started < 5000, 'it waited far longer than its timeout');
    } finally {
      await close();
    }
    const home = process.env.HOME;
    const dir = mkdtempSync(join(tmpdir(), 'perseid-no-kube-'));
    process.env.HOME = dir;
    try {
      await assert.rejects(new KubernetesActuator({ deployment: 'web', log }).current([]), /^Error: no Kubernetes configuration found: run the autoscaler in a pod .*, or set KUBECONFIG/);
    } finally {
      process.env.HOME = home;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('perseid autoscale --kubernetes with no configuration: one line and exit 1 at start, not a failed round every interval', async () => {
    const home = mkdtempSync(join(tmpdir(), 'perseid-no-kube-'));
    try {
      const autoscale = spawnPerseid(['autoscale', '--kubernetes', 'web', '--interval-s', '0.2'], { HOME: home, KUBECONFIG: '', MONGO_URL: 'mongodb://127.0.0.1:1/x', REDIS_URL: '' });
      // Bounded: an autoscaler that starts anyway keeps running, its rounds failing.
      const killer = setTimeout(() => autoscale.child.kill('SIGKILL'), 10_000);
      const code = await exited(autoscale.child).finally(() => clearTimeout(killer));
      assert.equal(autoscale.child.signalCode, null, `it started without a configuration:\n${autoscale.output()}`);
      assert.equal(code, 1);
      assert.match(autoscale.output(), /^perseid autoscale: no Kubernetes configuration found: run the autoscaler in a pod [^\n]*\n$/);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
