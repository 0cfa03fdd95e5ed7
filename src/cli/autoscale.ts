/**
 * `perseid autoscale`: turn the cluster's load, as discovery reports it, into
 * a server count, and act on it. The autoscaler's modules (prom-client among
 * them) load only when the command runs, not with every `perseid` command.
 */
import { resolve } from 'node:path';
import type { Actuator } from '../autoscale/actuator.js';
import { configProblem, METRICS, windowProblem, type Metric, type PolicyConfig, type Rule } from '../autoscale/policy.js';
import { createLogger, redactedUrl, setLogLevel, type LogLevel } from '../log.js';
import { integerOption, numberOption, UsageError, type CommandSpec, type Parsed } from './args.js';
import { checkMongoUrls, listenOn, type AddressFlags } from './preflight.js';
import { openDiscoveryStore } from './scale-out.js';
import { StartupError } from './startup-error.js';

const DEFAULT_RULES = ['sessions:300:100', 'cpuPercent:70:30'];
const METRICS_LISTEN: AddressFlags = { port: '--metrics-port or PERSEID_AUTOSCALE_METRICS_PORT', host: '--metrics-host' };

export const autoscaleCommand: CommandSpec = {
  name: 'autoscale',
  summary: 'Watch the servers\' load in discovery and keep the number of servers right: add when busy, drain and remove when idle.',
  usage: 'perseid autoscale (--local <app> | --scale-command "<cmd {n}>" | --kubernetes <deployment> | --dry-run) [options]',
  example: 'perseid autoscale --local app.js --local-arg=--balancer --min 1 --max 4 --rule sessions:200:50 --metrics-port 9464',
  options: {
    local: { type: 'string', value: '<app-module>', help: 'Start and drain Perseid processes of this app on this machine' },
    'local-arg': { type: 'string', multiple: true, value: '<arg>', help: 'An argument for each local `perseid start` (repeat; e.g. --local-arg=--drain-ms=2000)' },
    'scale-command': { type: 'string', value: '"<cmd {n}>"', help: 'Run this shell command with {n} replaced by the count (docker compose, fly, nomad)' },
    kubernetes: { type: 'string', value: '<deployment>', help: 'Scale this Kubernetes Deployment (needs @kubernetes/client-node)' },
    namespace: { type: 'string', value: '<ns>', help: 'The Deployment\'s namespace (default: the kubeconfig context\'s, else default)' },
    'dry-run': { type: 'boolean', help: 'Decide, print and export, change nothing (the count is what discovery shows)' },
    min: { type: 'string', default: '1', value: '<n>', help: 'Fewest servers (1 or more: with none, no server would report the load to scale up on)' },
    max: { type: 'string', default: '10', value: '<n>', help: 'Most servers' },
    step: { type: 'string', default: '1', value: '<n>', help: 'Servers added or removed per change' },
    rule: {
      type: 'string',
      multiple: true,
      value: '<metric:above:below>',
      help: `Add servers when the average per server of a metric stays above <above>; remove when every rule stays below its <below> (repeat; metrics: ${METRICS.join(', ')}; default ${DEFAULT_RULES.join(' and ')})`,
    },
    'hold-s': { type: 'string', default: '60', value: '<s>', help: 'How long a rule must hold before it counts' },
    'window-s': { type: 'string', default: '300', value: '<s>', help: 'Rounds older than this are forgotten (at least --hold-s, and --min-samples rounds)' },
    'interval-s': { type: 'string', default: '10', value: '<s>', help: 'Time between rounds' },
    'min-samples': { type: 'string', default: '5', value: '<n>', help: 'Rounds needed since the last change before deciding' },
    'up-cooldown-s': { type: 'string', default: '60', value: '<s>', help: 'Least time from a change to an increase' },
    'down-cooldown-s': { type: 'string', default: '300', value: '<s>', help: 'Least time from a change to a decrease' },
    'settle-timeout-s': { type: 'string', default: '600', value: '<s>', help: 'How long a change may take to settle before a warning, and deciding without waiting for it' },
    discovery: { type: 'string', env: 'PERSEID_DISCOVERY', value: '<redis|mongo>', help: 'Where the servers register (default redis when REDIS_URL is set, else mongo)' },
    'discovery-interval-ms': { type: 'string', env: 'PERSEID_DISCOVERY_INTERVAL_MS', default: '2000', value: '<ms>', help: 'The servers\' announce interval (entries live 3 of them)' },
    'metrics-port': { type: 'string', env: 'PERSEID_AUTOSCALE_METRICS_PORT', value: '<port>', help: 'Serve Prometheus metrics (desired count, per-server load) at http://<host>:<port>/metrics' },
    'metrics-host': { type: 'string', default: '127.0.0.1', value: '<address>', help: 'Address of the metrics endpoint (0.0.0.0 in a container)' },
    'log-level': { type: 'string', env: 'PERSEID_LOG_LEVEL', default: 'info', value: '<level>', help: 'debug, info, warn, error or silent' },
  },
  details: [
    'Reads the registry the servers of a cluster share: MONGO_URL (and REDIS_URL for a registry in Redis) as the servers have them.',
    'Each round prints the servers seen, their average load and the decision. A change waits until the last one has settled',
    '(every server it asked for in discovery, the platform done), for --min-samples rounds, and for its cooldown.',
    'A change that has not settled after --settle-timeout-s is warned about, and the autoscaler decides from the servers that answer.',
    'A scale that fails is tried again after the round interval, doubling with each failure in a row, up to 5 minutes.',
    'Scaling down drains first: the servers that leave stop taking clients and close theirs gradually, so clients reconnect to the others.',
  ].join('\n'),
};

function seconds(values: Parsed['values'], name: string, min = 0): number {
  return Math.round(numberOption(values, name, min, 86400)! * 1000);
}

export function parseRule(text: string): Rule {
  const [metric, above, below, ...rest] = text.split(':');
  const a = Number(above);
  const b = Number(below);
  if (rest.length || !metric || !Number.isFinite(a) || !Number.isFinite(b) || above === '' || below === '') {
    throw new UsageError(`--rule must be <metric>:<above>:<below>, e.g. sessions:200:50 (got ${text})`);
  }
  if (!METRICS.includes(metric as Metric)) throw new UsageError(`--rule: unknown metric ${metric} (one of ${METRICS.join(', ')})`);
  return { metric: metric as Metric, above: a, below: b };
}

export function policyFrom(values: Parsed['values']): PolicyConfig {
  const policy: PolicyConfig = {
    min: integerOption(values, 'min', 0, 10000)!,
    max: integerOption(values, 'max', 1, 10000)!,
    step: integerOption(values, 'step', 1, 10000)!,
    rules: ((values.rule as string[] | undefined) ?? DEFAULT_RULES).map(parseRule),
    holdMs: seconds(values, 'hold-s'),
    minSamples: integerOption(values, 'min-samples', 1, 100000)!,
    upCooldownMs: seconds(values, 'up-cooldown-s'),
    downCooldownMs: seconds(values, 'down-cooldown-s'),
  };
  const problem = configProblem(policy);
  if (problem) throw new UsageError(problem);
  return policy;
}

async function actuatorFrom(values: Parsed['values'], log: ReturnType<typeof createLogger>): Promise<Actuator> {
  const chosen = ['local', 'scale-command', 'kubernetes', 'dry-run'].filter((k) => values[k] !== undefined && values[k] !== false);
  if (chosen.length !== 1) {
    throw new UsageError(chosen.length ? `choose one of --${chosen.join(', --')}` : 'say how to scale: --local <app>, --scale-command "<cmd {n}>", --kubernetes <deployment> or --dry-run');
  }
  if (typeof values.local === 'string') {
    const args = (values['local-arg'] as string[] | undefined) ?? [];
    // Given again, they would win over the ones the actuator gives each server: every server on one port, none where it looks.
    const taken = args.find((arg) => /^(--port|--host|--public-url)(=|$)|^-p/.test(arg));
    if (taken) throw new UsageError(`--local-arg ${taken}: --local gives each server its own free port, its host (127.0.0.1) and its public URL; leave them out`);
    const { LocalActuator } = await import('../autoscale/actuator-local.js');
    return new LocalActuator({ app: resolve(values.local), args, log: log.child('local') });
  }
  if (typeof values['scale-command'] === 'string') {
    if (!values['scale-command'].includes('{n}')) throw new UsageError('--scale-command must contain {n}, where the count goes');
    const { CommandActuator } = await import('../autoscale/actuator-command.js');
    return new CommandActuator({ template: values['scale-command'], log: log.child('command') });
  }
  if (typeof values.kubernetes === 'string') {
    const { KubernetesActuator } = await import('../autoscale/actuator-kubernetes.js');
    const actuator = new KubernetesActuator({ deployment: values.kubernetes, namespace: values.namespace as string | undefined, log: log.child('kubernetes') });
    // Running on without a client or a configuration, it failed every round while its /health said ready.
    await actuator.load().catch((error: Error) => {
      throw new StartupError(error.message, error);
    });
    return actuator;
  }
  const { DryRunActuator } = await import('../autoscale/actuator-dry-run.js');
  return new DryRunActuator();
}

export async function runAutoscale(parsed: Parsed, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const { values } = parsed;
  const level = String(values['log-level']);
  if (!['debug', 'info', 'warn', 'error', 'silent'].includes(level)) throw new UsageError('--log-level must be debug, info, warn, error or silent');
  setLogLevel(level as LogLevel);
  const log = createLogger('autoscale');
  const policy = policyFrom(values);
  const intervalMs = seconds(values, 'interval-s', 0.05);
  const windowMs = seconds(values, 'window-s', 0.05);
  const rounds = windowProblem(policy, intervalMs, windowMs);
  if (rounds) throw new UsageError(rounds);
  const announceMs = integerOption(values, 'discovery-interval-ms', 100, 600000)!;
  const redisUrl = env.REDIS_URL || undefined;
  const mongoUrl = env.MONGO_URL || undefined;
  const discovery = String(values.discovery ?? (redisUrl ? 'redis' : 'mongo'));
  if (discovery !== 'redis' && discovery !== 'mongo') throw new UsageError(`--discovery must be redis or mongo (got ${discovery})`);
  if (!mongoUrl) throw new UsageError('perseid autoscale reads the cluster\'s registry: set MONGO_URL (and REDIS_URL for a registry in Redis) as the servers have them.');
  if (discovery === 'redis' && !redisUrl) throw new UsageError('Discovery in Redis needs REDIS_URL (or use --discovery mongo).');
  await checkMongoUrls(env);
  const metricsPort = integerOption(values, 'metrics-port', 0, 65535);
  const actuator = await actuatorFrom(values, log);
  const [{ AutoscaleMetrics }, { Autoscaler }, { serveMetrics }] = await Promise.all([
    import('../autoscale/autoscale-metrics.js'),
    import('../autoscale/autoscaler.js'),
    import('../autoscale/exporter.js'),
  ]);

  const metrics = new AutoscaleMetrics();
  const metricsHost = String(values['metrics-host']);
  // Before the registry opens: a port in use is one line, with nothing to close.
  const exporter = metricsPort === undefined ? undefined : await listenOn(() => serveMetrics(metrics.registry, metricsPort, metricsHost), metricsPort, metricsHost, METRICS_LISTEN);
  const registry = await openDiscoveryStore({ discovery, redisUrl, mongoUrl }, log.child('discovery'));
  const autoscaler = new Autoscaler({
    store: registry.store,
    ttlMs: 3 * announceMs,
    actuator,
    policy,
    intervalMs,
    windowMs,
    settleTimeoutMs: seconds(values, 'settle-timeout-s'),
    print: (line) => process.stdout.write(`${line}\n`),
    log,
    metrics,
  });
  log.info('autoscaling', {
    actuator: actuator.name,
    discovery,
    registry: redactedUrl(discovery === 'redis' ? redisUrl! : mongoUrl),
    min: policy.min,
    max: policy.max,
    rules: policy.rules.map((r) => `${r.metric}:${r.above}:${r.below}`).join(','),
    metrics: exporter?.url,
  });
  autoscaler.start();
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
    log.info('stopping', { signal });
    void autoscaler
      .stop()
      .then(() => actuator.close())
      .then(() => Promise.all([registry.close(), exporter?.close()]))
      .then(
        () => process.exit(0),
        (error: Error) => {
          log.error('stopping failed', { error: error.message });
          process.exit(1);
        },
      );
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
}
