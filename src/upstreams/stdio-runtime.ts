// The I/O side of stdio UpstreamServers: informers on the Deployments, Services, pods and
// NetworkPolicies the operator made for them (every replica reads them to find the bridge's
// address and health), and the leader's server-side apply of the desired objects
// (stdio-objects.ts). Level-based: an object whose hash annotation differs from the desired one,
// or that is missing, is applied again, whoever changed or deleted it.
import type { AppsV1Api, KubernetesListObject, KubernetesObject, V1Deployment, V1Pod, V1Service } from '@kubernetes/client-node';
import { AppsV1ApiRequestFactory, AppsV1ApiResponseProcessor } from '@kubernetes/client-node/dist/gen/apis/AppsV1Api.js';
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import type { Logger } from 'pino';
import {
  GROUP,
  LABEL_UPSTREAM_SERVER,
  STDIO_FIELD_MANAGER,
  UPSTREAMSERVER_KIND,
  UPSTREAMSERVER_PLURAL,
  VERSION,
  type StdioServer,
  type UpstreamServer,
} from '../api/v1alpha1/index.js';
import { apiClass } from '../kube/api-client.js';
import { LIST_PAGE_SIZE, ResilientInformer, withoutManagedFields } from '../kube/informer.js';
import { apiErrorMessage, isNotFound, type KubeClients } from '../kube/clients.js';
import { stdioHealth, type StdioHealth } from './stdio-health.js';
import { ANNOTATION_STDIO_HASH, buildStdioObjects, stdioObjectName, type StdioOptions } from './stdio-objects.js';

type Kind = 'NetworkPolicy' | 'Service' | 'Deployment' | 'Pod';
type Page = KubernetesListObject<KubernetesObject>;
interface KindApi {
  path: string;
  list(namespace: string, cont: string | undefined): Promise<Page>;
  /** Server-side apply of the whole object (absent for pods: the Deployment makes them). */
  apply?(name: string, namespace: string, body: KubernetesObject): Promise<unknown>;
  delete?(name: string, namespace: string): Promise<unknown>;
}
const RETRY_MS = 10_000;
const SSA = setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply);

/**
 * One API per kind. Apps comes from its own group file (src/kube/api-client.ts: the generated
 * index would cost the gateway ~35 MB). Patch bodies are sent as written (no model mapping).
 */
function kindApis(clients: KubeClients): Record<Kind, KindApi> {
  const apps = clients.kc.makeApiClient(apiClass<AppsV1Api>(AppsV1ApiRequestFactory, AppsV1ApiResponseProcessor));
  const sel = { labelSelector: LABEL_UPSTREAM_SERVER, limit: LIST_PAGE_SIZE };
  const ssa = { fieldManager: STDIO_FIELD_MANAGER, force: true };
  return {
    NetworkPolicy: {
      path: 'apis/networking.k8s.io/v1',
      list: (namespace, cont) => clients.networking.listNamespacedNetworkPolicy({ namespace, ...sel, _continue: cont }) as Promise<Page>,
      apply: (name, namespace, body) => clients.networking.patchNamespacedNetworkPolicy({ name, namespace, body, ...ssa }, SSA),
      delete: (name, namespace) => clients.networking.deleteNamespacedNetworkPolicy({ name, namespace }),
    },
    Service: {
      path: 'api/v1',
      list: (namespace, cont) => clients.core.listNamespacedService({ namespace, ...sel, _continue: cont }) as Promise<Page>,
      apply: (name, namespace, body) => clients.core.patchNamespacedService({ name, namespace, body, ...ssa }, SSA),
      delete: (name, namespace) => clients.core.deleteNamespacedService({ name, namespace }),
    },
    Deployment: {
      path: 'apis/apps/v1',
      list: (namespace, cont) => apps.listNamespacedDeployment({ namespace, ...sel, _continue: cont }) as Promise<Page>,
      apply: (name, namespace, body) => apps.patchNamespacedDeployment({ name, namespace, body, ...ssa }, SSA),
      delete: (name, namespace) => apps.deleteNamespacedDeployment({ name, namespace }),
    },
    Pod: { path: 'api/v1', list: (namespace, cont) => clients.core.listNamespacedPod({ namespace, ...sel, _continue: cont }) as Promise<Page> },
  };
}
const PLURAL: Record<Kind, string> = { NetworkPolicy: 'networkpolicies', Service: 'services', Deployment: 'deployments', Pod: 'pods' };

/** The UpstreamServer an object belongs to (its controller owner reference). */
function ownerOf(obj: KubernetesObject): string | undefined {
  return obj.metadata?.ownerReferences?.find((r) => r.kind === UPSTREAMSERVER_KIND && r.controller)?.name;
}

export class StdioRuntime {
  private readonly apis: Record<Kind, KindApi>;
  private readonly informers = new Map<Kind, ResilientInformer<KubernetesObject>>();
  private readonly applyErrors = new Map<string, string>();
  private readonly inFlight = new Set<string>();
  /** Servers whose objects a cleanup is deleting (one at a time). */
  private readonly cleaning = new Set<string>();
  /** Label value → server name: pods are owned by a ReplicaSet, so they are matched by label. */
  private readonly byLabel = new Map<string, string>();
  /** Server → hash annotation of the Deployment its current spec asks for. */
  private readonly desired = new Map<string, string>();
  /** Why stdio servers cannot run at all (the informers could not start). */
  private unavailable: string | undefined;
  private retry: NodeJS.Timeout | undefined;

  constructor(
    private readonly clients: KubeClients,
    private readonly namespace: string,
    private readonly options: StdioOptions,
    private readonly log: Logger,
    private readonly isLeader: () => boolean,
    /** Told the UpstreamServer name whenever one of its objects changes. */
    private readonly onChange: (server: string) => void,
  ) {
    this.apis = kindApis(clients);
    for (const kind of Object.keys(this.apis) as Kind[]) {
      const api = this.apis[kind];
      const informer = new ResilientInformer<KubernetesObject>(
        clients.kc,
        `/${api.path}/namespaces/${namespace}/${PLURAL[kind]}`,
        (cont) => api.list(namespace, cont),
        log.child({ informer: `stdio-${PLURAL[kind]}` }),
        { labelSelector: LABEL_UPSTREAM_SERVER, transform: withoutManagedFields },
      );
      const changed = (o: KubernetesObject): void => {
        const owner = ownerOf(o) ?? this.byLabel.get(o.metadata?.labels?.[LABEL_UPSTREAM_SERVER] ?? '');
        if (owner) this.onChange(owner);
      };
      informer.onChange(changed);
      informer.onDelete(changed);
      this.informers.set(kind, informer);
    }
  }

  async start(): Promise<void> {
    // Without the RBAC for these kinds (an old Role) the gateway still serves url upstreams; stdio
    // servers stay ServerFailing and say what is missing.
    await Promise.all(
      [...this.informers.entries()].map(([kind, informer]) =>
        informer.start().catch(async (err: unknown) => {
          this.unavailable = `The gateway cannot watch ${PLURAL[kind]} in namespace ${this.namespace} (${apiErrorMessage(err)}); its Role needs get, list, watch, create, patch and delete on deployments, services and networkpolicies (see deploy/codemode-operator.yaml). Restart it after fixing.`;
          this.log.warn({ err: apiErrorMessage(err) }, 'Cannot watch the objects of stdio UpstreamServers; stdio servers stay not Ready');
          await informer.stop();
        }),
      ),
    );
    // Failed applies are retried; a server whose objects were refused stays ServerFailing meanwhile.
    this.retry = setInterval(() => {
      for (const name of this.applyErrors.keys()) this.onChange(name);
    }, RETRY_MS);
    this.retry.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.retry);
    await Promise.all([...this.informers.values()].map((i) => i.stop()));
  }

  private get<T extends KubernetesObject>(kind: Kind, server: string): T | undefined {
    return this.informers.get(kind)?.get(stdioObjectName(server), this.namespace) as T | undefined;
  }

  /** The leader applies whatever is missing or differs from the desired objects. */
  ensure(server: UpstreamServer, stdio: StdioServer): void {
    const name = server.metadata.name;
    const objects = buildStdioObjects({ ...server, metadata: { ...server.metadata, namespace: this.namespace } }, stdio, this.options);
    // Every replica knows which Deployment the spec asks for (health() waits for it).
    this.desired.set(name, objects.find((o) => o.kind === 'Deployment')?.metadata?.annotations?.[ANNOTATION_STDIO_HASH] ?? '');
    if (!this.isLeader() || this.unavailable !== undefined) return;
    for (const obj of objects) {
      const cached = this.get(obj.kind as Kind, name);
      const hash = obj.metadata?.annotations?.[ANNOTATION_STDIO_HASH] ?? '';
      if (cached?.metadata?.annotations?.[ANNOTATION_STDIO_HASH] === hash && !this.applyErrors.has(name)) continue;
      const key = `${obj.kind}/${name}/${hash}`;
      if (this.inFlight.has(key)) continue;
      this.inFlight.add(key);
      const kind = obj.kind as Kind;
      Promise.resolve()
        .then(() => this.apis[kind].apply?.(obj.metadata?.name ?? '', this.namespace, obj))
        .then(() => {
          if (this.applyErrors.delete(name)) this.onChange(name);
          this.log.info({ upstream: name, kind: obj.kind, object: obj.metadata?.name }, `Applied the ${obj.kind} of a stdio UpstreamServer`);
        })
        .catch((err: unknown) => {
          const message = `${obj.kind} ${obj.metadata?.name}: ${apiErrorMessage(err)}`;
          this.log.warn({ upstream: name, err: message }, 'Failed to apply an object of a stdio UpstreamServer; retrying');
          this.applyErrors.set(name, message);
          this.onChange(name);
        })
        .finally(() => this.inFlight.delete(key));
    }
  }

  /**
   * A server that is no longer stdio (now a url): the leader deletes what it had. Judged from the
   * watcher's copy of the server, which can be behind an edit back to stdio (a leader taking over
   * with a lagging cache): the server is read from the API first, and nothing goes while it is stdio.
   */
  cleanup(server: string): void {
    this.applyErrors.delete(server);
    this.desired.delete(server);
    if (!this.isLeader()) return;
    const left = (Object.keys(this.apis) as Kind[]).flatMap((kind) => {
      const remove = this.apis[kind].delete;
      const obj = this.get(kind, server);
      return remove && obj && ownerOf(obj) === server ? [{ remove, name: obj.metadata?.name ?? '' }] : [];
    });
    if (left.length === 0 || this.cleaning.has(server)) return;
    this.cleaning.add(server);
    void this.stillStdio(server)
      .then((stdio) => {
        if (stdio) return;
        return Promise.all(
          left.map(({ remove, name }) =>
            remove(name, this.namespace).catch((err: unknown) => {
              if (!isNotFound(err))
                this.log.warn({ upstream: server, err: apiErrorMessage(err) }, 'Failed to delete an object of a former stdio UpstreamServer');
            }),
          ),
        );
      })
      .catch((err: unknown) =>
        this.log.warn({ upstream: server, err: apiErrorMessage(err) }, 'Could not read an UpstreamServer before deleting its stdio objects'),
      )
      .finally(() => this.cleaning.delete(server));
  }

  /** Whether the UpstreamServer, as the API server has it now, runs a stdio command. */
  private async stillStdio(server: string): Promise<boolean> {
    try {
      const now = (await this.clients.custom.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: this.namespace,
        plural: UPSTREAMSERVER_PLURAL,
        name: server,
      })) as { spec?: { stdio?: unknown } };
      return now.spec?.stdio !== undefined && now.spec.stdio !== null;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  forget(server: string): void {
    this.applyErrors.delete(server);
    this.byLabel.delete(stdioObjectName(server));
    this.desired.delete(server);
  }

  health(server: string): StdioHealth {
    const label = stdioObjectName(server);
    this.byLabel.set(label, server);
    const pods = (this.informers.get('Pod')?.list(this.namespace) ?? []).filter((p) => p.metadata?.labels?.[LABEL_UPSTREAM_SERVER] === label) as V1Pod[];
    return stdioHealth(this.get<V1Deployment>('Deployment', server), pods, this.unavailable ?? this.applyErrors.get(server), this.desired.get(server));
  }

  /** The Service's ClusterIP once it has one. */
  clusterIP(server: string): string | undefined {
    const ip = this.get<V1Service>('Service', server)?.spec?.clusterIP;
    return ip && ip !== 'None' ? ip : undefined;
  }
}
