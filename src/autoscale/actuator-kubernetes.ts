/**
 * An actuator that scales a Kubernetes Deployment through the official
 * client (`@kubernetes/client-node`, loaded only when this actuator is used:
 * `npm install @kubernetes/client-node` where it is). Choose it when Perseid
 * runs in Kubernetes and you want this autoscaler's policy; to let the HPA or
 * KEDA decide instead, scale on the metrics `perseid autoscale` exports
 * (deploy/kubernetes/). Credentials: in a pod, its service account (it needs
 * get and patch on deployments/scale and deployments, and patch on pods);
 * elsewhere, KUBECONFIG or ~/.kube/config.
 *
 * Going down, it first marks the least loaded pods (by the host name each
 * server announces, which is its pod's name) with a low
 * `controller.kubernetes.io/pod-deletion-cost`, so the ReplicaSet removes
 * those; each drains on the SIGTERM Kubernetes sends (the manifests' preStop
 * and terminationGracePeriodSeconds leave it the time). A mark outlives a
 * scale that failed, or a pod the ReplicaSet kept (it removes pods not ready
 * first), and would pick that pod at a later scale-down however many clients
 * it has by then: so marks are taken off again when the scale fails, and at
 * each scale-down from the pods marked before that are not chosen this time.
 */
import type * as K8s from '@kubernetes/client-node';
import type { ServerEntry } from '../cluster/discovery-store.js';
import type { Logger } from '../log.js';
import { checkScaleTarget, leastLoaded, type Actuator } from './actuator.js';

/** Only the types are imported here: the module itself loads when the actuator is first used. */
type Client = typeof K8s;

export interface KubernetesActuatorOptions {
  deployment: string;
  /** Default: the namespace of the kubeconfig's current context, else `default`. */
  namespace?: string;
  /** Longest one API request may take (default 10000 ms): a platform that does not answer fails the round rather than holding it for ever. */
  requestTimeoutMs?: number;
  log: Logger;
}

export const DELETION_COST = 'controller.kubernetes.io/pod-deletion-cost';

/**
 * The client's errors in one line: its own carry the status, "Unknown API Status Code!" and the raw body and
 * headers over four lines; the API server's Status message (what RBAC refused, what is missing) is what helps.
 */
function oneLine(what: string, error: unknown, timeoutMs: number): Error {
  const { code, body, name, message } = error as { code?: unknown; body?: unknown; name?: string; message?: string };
  if (name === 'TimeoutError' || name === 'AbortError') return new Error(`Kubernetes did not answer within ${timeoutMs / 1000} s (${what})`);
  if (typeof code !== 'number') return new Error(`Kubernetes: ${what}: ${String(message).split('\n')[0]}`);
  let said = '';
  try {
    said = (JSON.parse(String(body)) as { message?: string }).message ?? '';
  } catch {
    // Not a Status object: the status code alone says enough.
  }
  // 401: who is asking was not recognised (a wrong or expired token); 403: they were, without the rights.
  const hint =
    code === 401
      ? ': it did not accept the credentials (a wrong or expired token): check KUBECONFIG\'s user, or the pod\'s service account token'
      : code === 403
        ? ': give the autoscaler\'s service account the rights in deploy/kubernetes/autoscaler.yaml (or check KUBECONFIG\'s user)'
        : '';
  return new Error(`Kubernetes refused to ${what} (HTTP ${code}${said ? `: ${said}` : ''})${hint}`);
}

async function call<T>(what: string, timeoutMs: number, request: () => Promise<T>): Promise<T> {
  try {
    return await request();
  } catch (error) {
    throw oneLine(what, error, timeoutMs);
  }
}

async function loadClient(): Promise<Client> {
  try {
    return await import('@kubernetes/client-node');
  } catch {
    throw new Error('the Kubernetes actuator needs @kubernetes/client-node 1.x: run `npm install @kubernetes/client-node@1` beside perseid');
  }
}

export class KubernetesActuator implements Actuator {
  readonly name = 'kubernetes';
  readonly acts = true;
  private api:
    | Promise<{ k8s: Client; apps: InstanceType<Client['AppsV1Api']>; core: InstanceType<Client['CoreV1Api']>; namespace: string; timeout: K8s.ConfigurationOptions }>
    | undefined;

  private readonly timeoutMs: number;
  /** Pods this actuator marked for removal that may still run. */
  private readonly marked = new Set<string>();

  constructor(private readonly options: KubernetesActuatorOptions) {
    this.timeoutMs = options.requestTimeoutMs ?? 10_000;
  }

  async current(_servers?: readonly ServerEntry[]): Promise<number> {
    const { apps, namespace, timeout } = await this.connect();
    const scale = await call(`read the scale of deployment ${namespace}/${this.options.deployment}`, this.timeoutMs, () => apps.readNamespacedDeploymentScale({ name: this.options.deployment, namespace }, timeout));
    return scale.spec?.replicas ?? 0;
  }

  async settling(_servers?: readonly ServerEntry[]): Promise<string | undefined> {
    const { apps, namespace, timeout } = await this.connect();
    const deployment = await call(`read deployment ${namespace}/${this.options.deployment}`, this.timeoutMs, () => apps.readNamespacedDeployment({ name: this.options.deployment, namespace }, timeout));
    const wanted = deployment.spec?.replicas ?? 0;
    const status = deployment.status ?? {};
    const ready = status.readyReplicas ?? 0;
    const total = status.replicas ?? 0;
    if (ready === wanted && total === wanted) return undefined;
    return `deployment ${this.options.deployment}: ${ready} of ${wanted} pods ready, ${total} running`;
  }

  async scaleTo(n: number, servers: readonly ServerEntry[]): Promise<void> {
    checkScaleTarget(n);
    const { k8s, apps, core, namespace, timeout } = await this.connect();
    const from = await this.current();
    const merge = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch, timeout);
    const mark = async (pod: string, cost: string | null): Promise<void> => {
      try {
        // In a merge patch, null removes the annotation.
        await call(`${cost === null ? 'unmark' : 'mark'} pod ${namespace}/${pod} for removal`, this.timeoutMs, () =>
          core.patchNamespacedPod({ name: pod, namespace, body: { metadata: { annotations: { [DELETION_COST]: cost } } } }, merge),
        );
        if (cost === null) this.marked.delete(pod);
        else this.marked.add(pod);
      } catch (error) {
        this.options.log.warn(`could not ${cost === null ? 'unmark' : 'mark'} a pod for removal`, { pod, error: (error as Error).message });
      }
    };
    let leaving: string[] = [];
    if (n < from) {
      // The pods to remove first: the least loaded. A pod that cannot be marked is left to the ReplicaSet's own choice.
      leaving = leastLoaded(servers, from - n, (s) => typeof s.host === 'string' && s.host !== '').map((s) => s.host!);
      const running = new Set(servers.map((s) => s.host));
      for (const pod of this.marked) {
        if (!running.has(pod)) this.marked.delete(pod);
        else if (!leaving.includes(pod)) await mark(pod, null);
      }
      for (const [i, pod] of leaving.entries()) await mark(pod, String(-1000 + i));
    }
    try {
      await call(`scale deployment ${namespace}/${this.options.deployment} to ${n}`, this.timeoutMs, () =>
        apps.patchNamespacedDeploymentScale({ name: this.options.deployment, namespace, body: { spec: { replicas: n } } }, merge),
      );
    } catch (error) {
      for (const pod of leaving) if (this.marked.has(pod)) await mark(pod, null);
      throw error;
    }
    this.options.log.info('scaled the deployment', { deployment: this.options.deployment, namespace, from, to: n });
  }

  /**
   * Loads the client and the configuration (no request yet): what is missing there (the client, any configuration)
   * stays missing, so the command says so at start instead of failing every round.
   */
  async load(): Promise<void> {
    await this.connect();
  }

  async close(): Promise<void> {}

  private connect(): NonNullable<KubernetesActuator['api']> {
    return (this.api ??= loadClient().then((k8s) => {
      const config = new k8s.KubeConfig();
      config.loadFromDefault();
      // The client's last resort when it finds no configuration: a local API server it then refuses to speak HTTP to.
      const cluster = config.getCurrentCluster();
      if (cluster?.name === 'cluster' && cluster.server === 'http://localhost:8080' && config.getCurrentUser()?.name === 'user') {
        throw new Error('no Kubernetes configuration found: run the autoscaler in a pod (with its service account), or set KUBECONFIG (or write ~/.kube/config)');
      }
      const namespace = this.options.namespace ?? config.getContextObject(config.getCurrentContext())?.namespace ?? 'default';
      const timeout: K8s.ConfigurationOptions = {
        middleware: [
          {
            pre: (request) => {
              request.setSignal(AbortSignal.timeout(this.timeoutMs));
              return new k8s.Observable(Promise.resolve(request));
            },
            post: (response) => new k8s.Observable(Promise.resolve(response)),
          },
        ],
        middlewareMergeStrategy: 'append',
      };
      return { k8s, apps: config.makeApiClient(k8s.AppsV1Api), core: config.makeApiClient(k8s.CoreV1Api), namespace, timeout };
    }));
  }
}
