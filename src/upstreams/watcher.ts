// Keeps the registry in step with the UpstreamServers of the namespace: one informer, the Secrets
// they name, one warm connection per upstream (rebuilt when its URL or header values change), and
// the status the leader replica writes. Level-based: every event re-derives one server's state
// from the cache, so the order of events does not matter.
import { createHash } from 'node:crypto';
import type { KubernetesObject } from '@kubernetes/client-node';
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import type { Tool } from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import {
  API_VERSION,
  GROUP,
  UPSTREAMSERVER_KIND,
  UPSTREAMSERVER_PLURAL,
  UpstreamReasons,
  VERSION,
  parseUpstreamServer,
  type UpstreamServer,
  type UpstreamServerSpec,
  type UpstreamServerStatus,
} from '../api/v1alpha1/index.js';
import { customResourceInformer, type ResilientInformer } from '../kube/informer.js';
import { apiErrorMessage, isConflict, isNotFound, type KubeClients } from '../kube/clients.js';
import type { CallGateLimits } from './call-gate.js';
import { UpstreamConnection, type ConnectionState } from './connection.js';
import { ToolFilter } from './policy.js';
import { Upstreams } from './registry.js';
import { resolveRef, SecretCache } from './secrets.js';
import { StdioRuntime } from './stdio-runtime.js';
import { stdioUrl, type StdioOptions } from './stdio-objects.js';
import { computeStatus, sameStatus, type Observation } from './status.js';
import type { UpstreamTool } from './types.js';

export const UPSTREAM_FIELD_MANAGER = 'codemode-gateway-upstreams';

export interface UpstreamWatcherDeps {
  clients: KubeClients;
  namespace: string;
  log: Logger;
  healthIntervalMs: number;
  requestTimeoutMs: number;
  /** Largest message read from an upstream (bounded-fetch.ts). */
  messageMaxBytes: number;
  /** Calls in flight at once per upstream and per user of it (call-gate.ts). */
  callLimits?: CallGateLimits;
  /** Only the leader writes status (replicas may see an upstream differently for a moment). */
  isLeader(): boolean;
  /** How the leader runs stdio UpstreamServers (the bridge image, who may reach them). */
  stdio: StdioOptions;
  /** Readiness per server for a gauge (undefined: the server is gone). */
  onReady?(server: string, ready: boolean | undefined): void;
  /** Calls in flight and waiting per server, for gauges. */
  onCalls?(server: string, calls: { active: number; waiting: number }): void;
}

interface Live {
  fingerprint: string;
  connection: UpstreamConnection;
}

function toTools(server: string, tools: readonly Tool[], filter: ToolFilter): UpstreamTool[] {
  return tools
    .filter((t) => filter.allows(t.name))
    .map((t) => ({
      server,
      name: t.name,
      ...(t.title !== undefined && { title: t.title }),
      ...(t.description !== undefined && { description: t.description }),
      inputSchema: t.inputSchema as Record<string, unknown>,
      ...(t.outputSchema !== undefined && { outputSchema: t.outputSchema as Record<string, unknown> }),
      ...(t.annotations !== undefined && { annotations: t.annotations as Record<string, unknown> }),
    }));
}

export class UpstreamWatcher {
  readonly registry: Upstreams;
  private readonly informer: ResilientInformer<KubernetesObject>;
  private readonly secrets: SecretCache;
  private readonly stdio: StdioRuntime;
  private readonly live = new Map<string, Live>();
  private readonly observed = new Map<string, Observation>();
  /** Each server's last published tools: the same array while its list and allow/deny lists are. */
  private readonly published = new Map<string, { listed: readonly Tool[]; lists: string; tools: UpstreamTool[] }>();
  private resync: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly d: UpstreamWatcherDeps) {
    this.registry = new Upstreams(d.callLimits, d.onCalls);
    const ns = d.namespace;
    this.informer = customResourceInformer(d.clients, ns, UPSTREAMSERVER_PLURAL, d.log);
    this.secrets = new SecretCache(d.clients.kc, d.clients.core, ns, d.log.child({ component: 'upstream-secrets' }), () => this.reconcileAll());
    this.informer.onChange((o) => this.reconcile(o.metadata?.name ?? ''));
    this.stdio = new StdioRuntime(d.clients, ns, d.stdio, d.log.child({ component: 'upstream-stdio' }), d.isLeader, (name) => this.reconcile(name));
  }

  async start(): Promise<void> {
    this.stopped = false;
    await this.stdio.start();
    await this.informer.start();
    this.reconcileAll();
    // A replica that becomes leader writes what it sees; unchanged statuses cost no write.
    // A new leader also applies the objects of stdio servers (a reconcile of each).
    let wasLeader = this.d.isLeader();
    this.resync = setInterval(
      () => {
        const leader = this.d.isLeader();
        if (leader && !wasLeader) this.reconcileAll();
        wasLeader = leader;
        this.writeAll();
      },
      Math.max(1000, this.d.healthIntervalMs),
    );
    this.resync.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.resync);
    await this.informer.stop();
    await Promise.all([...this.live.values()].map((l) => l.connection.stop()));
    this.live.clear();
    await this.secrets.stop();
    await this.stdio.stop();
  }

  private reconcileAll(): void {
    const names = new Set([...this.informer.list(this.d.namespace).map((o) => o.metadata?.name ?? ''), ...this.live.keys(), ...this.observed.keys()]);
    for (const name of names) this.reconcile(name);
  }

  private reconcile(name: string): void {
    if (this.stopped || name === '') return;
    const obj = this.informer.get(name, this.d.namespace);
    if (!obj || obj.metadata?.deletionTimestamp) return this.forget(name);
    const parsed = parseUpstreamServer(obj);
    this.secrets.retain(this.secretNames());
    if (!parsed.ok) return this.observe(name, undefined, { kind: 'invalid', message: parsed.message });
    const server = parsed.server;
    const spec = server.spec;
    // The bearer token comes last: it wins over a header of the same name.
    const refs = [
      ...(spec.headers ?? []).map((h) => ({ header: h.name, ref: h.secretKeyRef, prefix: '' })),
      ...(spec.bearerTokenSecretRef ? [{ header: 'Authorization', ref: spec.bearerTokenSecretRef, prefix: 'Bearer ' }] : []),
    ];
    const headers: Record<string, string> = {};
    for (const { header, ref, prefix } of refs) {
      const r = resolveRef(ref, this.secrets.get(ref.name));
      if (!r.ok) return this.observe(name, server, r.pending ? { kind: 'waiting' } : { kind: 'secret-missing', message: r.message });
      headers[header] = `${prefix}${r.value}`;
    }
    // A stdio server's Secret variables are read by the kubelet, not the gateway: without this
    // check its spec could name any Secret of the namespace (the gateway's tokens file, say) past
    // the gateway's own RBAC (upstreams.secretNames). So the gateway reads each first, as it does
    // a header's, and starts the server only when it may.
    for (const e of spec.stdio?.env ?? []) {
      if (!e.secretKeyRef) continue;
      const r = resolveRef(e.secretKeyRef, this.secrets.get(e.secretKeyRef.name));
      if (!r.ok) return this.observe(name, server, r.pending ? { kind: 'waiting' } : { kind: 'secret-missing', message: r.message });
    }
    const url = this.urlOf(server);
    if (typeof url !== 'string') return this.observe(name, server, url);
    // Any spec change (a new generation) or new header values: connect afresh and list the catalog again.
    const fingerprint = createHash('sha256')
      .update(JSON.stringify([server.metadata.generation, url, Object.entries(headers).sort()]))
      .digest('hex');
    let live = this.live.get(name);
    if (live?.fingerprint !== fingerprint) {
      void live?.connection.stop();
      const connection = new UpstreamConnection(
        name,
        { url, headers },
        {
          healthIntervalMs: this.d.healthIntervalMs,
          requestTimeoutMs: this.d.requestTimeoutMs,
          messageMaxBytes: this.d.messageMaxBytes,
          onState: () => this.reconcile(name),
          log: this.d.log,
        },
      );
      live = { fingerprint, connection };
      this.live.set(name, live);
      connection.start();
    }
    const state = live.connection.state;
    this.observe(name, server, connectionObservation(state, this.toolsOf(name, state.tools, spec.tools).length), live.connection, state);
  }

  /**
   * spec.url, or for a stdio server its bridge's Service ClusterIP (reachable from a gateway pod
   * and from a node, where cluster DNS may not resolve) once its Deployment is available.
   */
  private urlOf(server: UpstreamServer): string | Observation {
    const { name } = server.metadata;
    const stdio = server.spec.stdio;
    if (!stdio) {
      this.stdio.cleanup(name);
      return server.spec.url ?? '';
    }
    this.stdio.ensure(server, stdio);
    const health = this.stdio.health(name);
    if (!health.available) return { kind: 'stdio', reason: health.reason, message: health.message };
    const ip = this.stdio.clusterIP(name);
    if (!ip) return { kind: 'stdio', reason: UpstreamReasons.ServerStarting, message: "Waiting for the server's Service to get a ClusterIP." };
    return stdioUrl(ip);
  }

  /** Publishes one server's view to the registry and writes its status. */
  private observe(name: string, server: UpstreamServer | undefined, o: Observation, connection?: UpstreamConnection, state?: ConnectionState): void {
    if (!connection) {
      const old = this.live.get(name);
      this.live.delete(name);
      void old?.connection.stop();
    }
    this.observed.set(name, o);
    const spec = server?.spec;
    const filter = new ToolFilter(spec?.tools);
    const ready = o.kind === 'connection' && o.ready;
    this.registry.set({
      name,
      // An invalid spec has no readable access list: nobody may use it.
      access: spec ? spec.access : { users: ['\u0000nobody'] },
      filter,
      callTimeoutMs: (spec?.callTimeoutSeconds ?? 60) * 1000,
      ready,
      reason: computeStatus(undefined, undefined, o, new Date(0)).conditions?.[0]?.reason ?? UpstreamReasons.Connecting,
      ...(!ready && { message: o.kind === 'connection' ? (o.error ?? 'Connecting.') : o.kind === 'waiting' ? 'Reading Secrets.' : o.message }),
      tools: ready && state ? this.toolsOf(name, state.tools, spec?.tools) : [],
      ...(connection && {
        call: (tool: string, args: Record<string, unknown>, timeoutMs: number, signal?: AbortSignal) => connection.call(tool, args, timeoutMs, signal),
      }),
    });
    this.d.onReady?.(name, ready);
    void this.writeStatus(name);
  }

  /**
   * The tools a server offers: the array published last while the connection's list and the
   * spec's allow/deny lists are the same, so a reconcile that changed neither (a status write, a
   * refresh of another upstream) gives the registry the catalog it holds.
   */
  private toolsOf(name: string, listed: readonly Tool[], lists: UpstreamServerSpec['tools']): UpstreamTool[] {
    const key = JSON.stringify(lists ?? null);
    const last = this.published.get(name);
    if (last?.listed === listed && last.lists === key) return last.tools;
    const tools = toTools(name, listed, new ToolFilter(lists));
    this.published.set(name, { listed, lists: key, tools });
    return tools;
  }

  private forget(name: string): void {
    const live = this.live.get(name);
    this.live.delete(name);
    this.observed.delete(name);
    this.published.delete(name);
    void live?.connection.stop();
    this.registry.delete(name);
    this.stdio.forget(name);
    this.d.onReady?.(name, undefined);
    this.secrets.retain(this.secretNames());
  }

  private secretNames(): Set<string> {
    const names = new Set<string>();
    for (const o of this.informer.list(this.d.namespace)) {
      const spec = (
        o as {
          spec?: {
            headers?: Array<{ secretKeyRef?: { name?: unknown } }>;
            bearerTokenSecretRef?: { name?: unknown };
            stdio?: { env?: Array<{ secretKeyRef?: { name?: unknown } }> };
          };
        }
      ).spec;
      for (const h of [...(spec?.headers ?? []), ...(spec?.stdio?.env ?? [])]) if (typeof h.secretKeyRef?.name === 'string') names.add(h.secretKeyRef.name);
      if (typeof spec?.bearerTokenSecretRef?.name === 'string') names.add(spec.bearerTokenSecretRef.name);
    }
    return names;
  }

  private writeAll(): void {
    for (const name of this.observed.keys()) void this.writeStatus(name);
  }

  /** Leader only; skipped when unchanged; guarded by resourceVersion (a newer copy re-triggers us). */
  private async writeStatus(name: string): Promise<void> {
    const o = this.observed.get(name);
    const obj = this.informer.get(name, this.d.namespace) as (KubernetesObject & { status?: UpstreamServerStatus }) | undefined;
    if (!o || !obj || this.stopped || !this.d.isLeader()) return;
    const next = computeStatus(obj.status, obj.metadata?.generation, o, new Date());
    if (sameStatus(obj.status, next)) return;
    try {
      await this.d.clients.custom.patchNamespacedCustomObjectStatus(
        {
          group: GROUP,
          version: VERSION,
          namespace: this.d.namespace,
          plural: UPSTREAMSERVER_PLURAL,
          name,
          body: {
            apiVersion: API_VERSION,
            kind: UPSTREAMSERVER_KIND,
            metadata: { name, namespace: this.d.namespace, resourceVersion: obj.metadata?.resourceVersion },
            status: next,
          },
          fieldManager: UPSTREAM_FIELD_MANAGER,
          force: true,
        },
        setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
      );
    } catch (err) {
      if (isNotFound(err) || isConflict(err)) return;
      this.d.log.warn({ upstream: name, err: apiErrorMessage(err) }, 'Failed to write the status of an UpstreamServer');
    }
  }
}

function connectionObservation(state: ConnectionState, toolCount: number): Observation {
  return {
    kind: 'connection',
    ready: state.ready,
    reason: state.reason,
    ...(state.error !== undefined && { error: state.error }),
    toolCount,
    ...(state.refreshedAt && { refreshedAt: state.refreshedAt }),
  };
}
