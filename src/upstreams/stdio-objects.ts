// Pure builders for what the operator runs for a stdio UpstreamServer: a Deployment of the
// server's own image with our bridge (images/stdio-bridge) in front, a Service, and a
// NetworkPolicy (ingress from the gateway's pods only; egress as the admin declared). All three
// are owned by the UpstreamServer, so deleting it garbage-collects them. No I/O here.
import { createHash } from 'node:crypto';
import type {
  KubernetesObject,
  V1Deployment,
  V1EnvVar,
  V1NetworkPolicy,
  V1NetworkPolicyEgressRule,
  V1NetworkPolicyIngressRule,
  V1Service,
} from '@kubernetes/client-node';
import {
  API_VERSION,
  LABEL_MANAGED_BY,
  LABEL_UPSTREAM_SERVER,
  MANAGED_BY_VALUE,
  STDIO_BRIDGE_DIR,
  STDIO_BRIDGE_PORT,
  UPSTREAMSERVER_KIND,
  type StdioServer,
  type UpstreamServer,
} from '../api/v1alpha1/index.js';

/** Annotation with the hash of the desired object: the leader re-applies when it differs. */
export const ANNOTATION_STDIO_HASH = 'codemode.dev/spec-hash';
const UNPRIVILEGED = 65534;

export interface StdioOptions {
  /** The image with the bridge binary at /bridge (CODEMODE_STDIO_BRIDGE_IMAGE). */
  bridgeImage: string;
  /** Labels of the gateway's pods: the only ones the NetworkPolicy admits. */
  gatewayPodLabels: Record<string, string>;
  /** Their namespace; undefined: the UpstreamServer's own. */
  gatewayNamespace?: string;
  /** The bridge ends a session after this long without a request (`stdioSessionIdleSeconds`). */
  sessionIdleSeconds: number;
}

/**
 * How long the bridge keeps a session nobody sends a request on: every gateway pings its
 * session each health interval, so one silent for four of them (at least a minute) belongs to a
 * replica that is gone or a connection that was dropped without its DELETE. Such sessions used to
 * stay 10 minutes, each holding a server process whose threads count against the pod's process
 * limit; a reconnect storm could fill it until every new server aborted at start.
 */
export function stdioSessionIdleSeconds(healthIntervalSeconds: number): number {
  return Math.max(60, 4 * healthIntervalSeconds);
}

/**
 * A DNS-1035 name (Services need one) for the objects of server `name`: `mcp-<name>` when that
 * fits, else shortened with a hash so two servers never share it.
 */
export function stdioObjectName(name: string): string {
  const clean = `mcp-${name.replace(/[^a-z0-9-]/g, '-')}`;
  if (clean.length <= 63 && clean === `mcp-${name}`) return clean;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 8);
  return `${clean.slice(0, 54).replace(/-+$/, '')}-${hash}`;
}

/** `k=v,k2=v2` → { k: v, k2: v2 } (the config field is validated already). */
export function parseLabels(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of text.split(',')) {
    const i = pair.indexOf('=');
    if (i > 0) out[pair.slice(0, i).trim()] = pair.slice(i + 1).trim();
  }
  return out;
}

/** The bridge's URL at a Service's ClusterIP (works in a pod and on a node, without cluster DNS). */
export function stdioUrl(clusterIP: string): string {
  return `http://${clusterIP.includes(':') ? `[${clusterIP}]` : clusterIP}:${STDIO_BRIDGE_PORT}/mcp`;
}

/** What selects the server's pods (the Deployment, the Service and the NetworkPolicy). */
function selector(server: UpstreamServer): Record<string, string> {
  return { [LABEL_UPSTREAM_SERVER]: stdioObjectName(server.metadata.name) };
}

function labels(server: UpstreamServer): Record<string, string> {
  return { [LABEL_MANAGED_BY]: MANAGED_BY_VALUE, ...selector(server) };
}

function meta(server: UpstreamServer): NonNullable<KubernetesObject['metadata']> {
  return {
    name: stdioObjectName(server.metadata.name),
    namespace: server.metadata.namespace,
    labels: labels(server),
    ownerReferences: [{ apiVersion: API_VERSION, kind: UPSTREAMSERVER_KIND, name: server.metadata.name, uid: server.metadata.uid ?? '', controller: true }],
  };
}

/** The object with its own content hash as an annotation (set last, over everything else). */
function hashed<T extends KubernetesObject>(obj: T): T {
  const hash = createHash('sha256').update(JSON.stringify(obj)).digest('hex').slice(0, 16);
  return { ...obj, metadata: { ...obj.metadata, annotations: { ...obj.metadata?.annotations, [ANNOTATION_STDIO_HASH]: hash } } };
}

const HARDENED = {
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  runAsNonRoot: true,
  capabilities: { drop: ['ALL'] },
};

function env(stdio: StdioServer): V1EnvVar[] {
  // Many servers (npx, uvx, caches) need a writable HOME; the root file system is read-only.
  const own = (stdio.env ?? []).map((e): V1EnvVar =>
    e.secretKeyRef
      ? { name: e.name, valueFrom: { secretKeyRef: { name: e.secretKeyRef.name, key: e.secretKeyRef.key } } }
      : { name: e.name, value: e.value ?? '' },
  );
  return own.some((e) => e.name === 'HOME') ? own : [{ name: 'HOME', value: '/tmp' }, ...own];
}

export function buildStdioDeployment(server: UpstreamServer, stdio: StdioServer, o: StdioOptions): V1Deployment {
  const bridge = `${STDIO_BRIDGE_DIR}/bridge`;
  const r = stdio.resources;
  return hashed<V1Deployment>({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: meta(server),
    spec: {
      replicas: 1,
      selector: { matchLabels: selector(server) },
      template: {
        metadata: { labels: labels(server) },
        spec: {
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: UNPRIVILEGED,
            runAsGroup: UNPRIVILEGED,
            fsGroup: UNPRIVILEGED,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          initContainers: [
            {
              name: 'install-bridge',
              image: o.bridgeImage,
              imagePullPolicy: 'IfNotPresent',
              command: ['/bridge', 'install', bridge],
              securityContext: HARDENED,
              resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { memory: '64Mi' } },
              volumeMounts: [{ name: 'bridge', mountPath: STDIO_BRIDGE_DIR }],
            },
          ],
          containers: [
            {
              name: 'server',
              image: stdio.image,
              ...(stdio.imagePullPolicy && { imagePullPolicy: stdio.imagePullPolicy }),
              command: [
                bridge,
                '--listen',
                `:${STDIO_BRIDGE_PORT}`,
                '--max-sessions',
                String(stdio.maxSessions),
                '--idle-timeout',
                `${o.sessionIdleSeconds}s`,
                '--',
                ...stdio.command,
                ...(stdio.args ?? []),
              ],
              ...(stdio.workingDir && { workingDir: stdio.workingDir }),
              env: env(stdio),
              ports: [{ name: 'mcp', containerPort: STDIO_BRIDGE_PORT, protocol: 'TCP' }],
              // A bridge short of CPU answers slowly, not wrongly: a 1 s probe timeout can turn the
              // Deployment unavailable under load, and the gateway drops its connection each time.
              readinessProbe: { httpGet: { path: '/healthz', port: 'mcp' }, periodSeconds: 5, timeoutSeconds: 5, failureThreshold: 3 },
              resources: {
                requests: { cpu: r?.requests?.cpu ?? '50m', memory: r?.requests?.memory ?? '64Mi' },
                limits: { ...(r?.limits?.cpu && { cpu: r.limits.cpu }), memory: r?.limits?.memory ?? '512Mi' },
              },
              securityContext: HARDENED,
              volumeMounts: [
                { name: 'bridge', mountPath: STDIO_BRIDGE_DIR, readOnly: true },
                { name: 'tmp', mountPath: '/tmp' },
              ],
            },
          ],
          volumes: [
            { name: 'bridge', emptyDir: { sizeLimit: '64Mi' } },
            { name: 'tmp', emptyDir: { sizeLimit: '1Gi' } },
          ],
        },
      },
    },
  });
}

export function buildStdioService(server: UpstreamServer): V1Service {
  return hashed<V1Service>({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta(server),
    spec: {
      type: 'ClusterIP',
      // A session lives in one pod: while a rollout has two, every request of a gateway must
      // reach the pod that holds its session (else 404s, and DELETEs that miss leave sessions).
      sessionAffinity: 'ClientIP',
      selector: selector(server),
      ports: [{ name: 'mcp', port: STDIO_BRIDGE_PORT, targetPort: 'mcp', protocol: 'TCP' }],
    },
  });
}

const DNS: V1NetworkPolicyEgressRule = {
  ports: [
    { port: 53, protocol: 'UDP' },
    { port: 53, protocol: 'TCP' },
  ],
};

/** Egress as declared: None → no rule (deny all), All → one empty rule, Rules → them plus DNS. */
export function egressRules(stdio: StdioServer): V1NetworkPolicyEgressRule[] {
  const e = stdio.egress ?? { allow: 'None' as const };
  if (e.allow === 'All') return [{}];
  if (e.allow === 'Rules') return [...((e.rules ?? []) as V1NetworkPolicyEgressRule[]), DNS];
  return [];
}

export function buildStdioNetworkPolicy(server: UpstreamServer, stdio: StdioServer, o: StdioOptions): V1NetworkPolicy {
  const ns = o.gatewayNamespace;
  return hashed<V1NetworkPolicy>({
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: meta(server),
    spec: {
      podSelector: { matchLabels: selector(server) },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [
        // `from` as on the wire: apply bodies are sent as written, not mapped from client-node's `_from`.
        {
          from: [
            {
              podSelector: { matchLabels: o.gatewayPodLabels },
              ...(ns !== undefined && ns !== server.metadata.namespace && { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } } }),
            },
          ],
          ports: [{ port: STDIO_BRIDGE_PORT, protocol: 'TCP' }],
        } as V1NetworkPolicyIngressRule,
      ],
      egress: egressRules(stdio),
    },
  });
}

/** The three objects, in apply order. */
export function buildStdioObjects(server: UpstreamServer, stdio: StdioServer, o: StdioOptions): KubernetesObject[] {
  return [buildStdioNetworkPolicy(server, stdio, o), buildStdioService(server), buildStdioDeployment(server, stdio, o)];
}
