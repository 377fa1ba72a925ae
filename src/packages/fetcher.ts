// The fetcher pod: one per install, the only pod that reaches the package index. It runs the
// session profile's image (same Python, platform and preinstalled packages as the session) with
// the sandbox's hardening (its security contexts from src/sandbox/pod.ts: non-root, read-only
// root, no capabilities; no token) but not the sandbox label: its own NetworkPolicy (below)
// allows DNS and the index's addresses, nothing else.
// Owned by its session, with a deadline, so nothing outlives an install the gateway gave up on.
import type { V1NetworkPolicy, V1NetworkPolicyPeer, V1OwnerReference, V1Pod } from '@kubernetes/client-node';
import { LABEL_MANAGED_BY, LABEL_PACKAGE_FETCHER, MANAGED_BY_VALUE } from '../api/v1alpha1/index.js';
import type { Config } from '../config/index.js';
import { containerSecurityContext, placementSpec, podSecurityContext, type SandboxPlacement } from '../sandbox/pod.js';

export const FETCHER_CONTAINER = 'fetcher';
export const FETCHER_NETWORK_POLICY_NAME = 'codemode-package-fetcher';

export type FetcherOptions = Pick<Config, 'packagesEgressCidrs' | 'packagesEgressExcept' | 'packagesTimeoutSeconds' | 'imagePullPolicy'>;

export interface FetcherPodParts {
  namespace: string;
  image: string;
  owner: V1OwnerReference;
  /** Label value naming the session (shortened like LABEL_SESSION). */
  session: string;
  runtimeClassName?: string;
  /** The profile's placement: the fetcher runs where the session's pods may. */
  placement?: SandboxPlacement;
  /** The install's byte limit: /tmp holds the downloads, the unpacked tree and the archive. */
  maxTotalBytes: number;
}

const MiB = 1024 * 1024;

export function buildFetcherPod(p: FetcherPodParts, o: FetcherOptions): V1Pod {
  const scratch = Math.ceil((3 * p.maxTotalBytes) / MiB) + 256;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: 'codemode-fetch-',
      namespace: p.namespace,
      labels: { [LABEL_MANAGED_BY]: MANAGED_BY_VALUE, [LABEL_PACKAGE_FETCHER]: p.session },
      ownerReferences: [p.owner],
    },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      terminationGracePeriodSeconds: 1,
      // Backstop: an install the gateway abandoned (killed mid-way) ends by itself.
      activeDeadlineSeconds: o.packagesTimeoutSeconds + 60,
      ...(p.runtimeClassName !== undefined && { runtimeClassName: p.runtimeClassName }),
      ...placementSpec(p.placement),
      securityContext: podSecurityContext(),
      containers: [
        {
          name: FETCHER_CONTAINER,
          image: p.image,
          imagePullPolicy: o.imagePullPolicy,
          command: ['sleep', 'infinity'],
          workingDir: '/tmp',
          env: [
            { name: 'HOME', value: '/tmp' },
            { name: 'TMPDIR', value: '/tmp' },
          ],
          securityContext: containerSecurityContext(),
          // pip's resolver and npm hold package metadata in memory: more than a sandbox's default.
          resources: { requests: { cpu: '100m', memory: '256Mi' }, limits: { cpu: '1', memory: '1Gi' } },
          volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }],
        },
      ],
      volumes: [{ name: 'tmp', emptyDir: { sizeLimit: `${scratch}Mi` } }],
    },
  };
}

function ipv4(cidr: string): { net: number; bits: number } | undefined {
  const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(cidr);
  if (!m) return undefined;
  const bits = Number(m[5]);
  const net = m.slice(1, 5).reduce((a, x) => a * 256 + Number(x), 0);
  return { net, bits };
}

/** Pure: whether `inner` lies inside `outer` (IPv4; an IPv6 pair only when outer is ::/0). */
export function cidrWithin(inner: string, outer: string): boolean {
  if (outer === '::/0') return inner.includes(':');
  const a = ipv4(inner);
  const b = ipv4(outer);
  if (!a || !b || a.bits < b.bits) return false;
  const size = 2 ** (32 - b.bits);
  return Math.floor(a.net / size) === Math.floor(b.net / size);
}

/**
 * Egress: DNS anywhere (the resolver's address is the cluster's business), and ports 80 and 443
 * to the configured ranges minus the excepted ones (each except goes with the ranges that hold
 * it: the API server refuses an except outside its cidr). No ingress at all.
 */
export function buildFetcherNetworkPolicy(namespace: string, o: FetcherOptions): V1NetworkPolicy {
  const peers: V1NetworkPolicyPeer[] = o.packagesEgressCidrs.map((cidr) => {
    const except = o.packagesEgressExcept.filter((e) => e !== cidr && cidrWithin(e, cidr));
    return { ipBlock: { cidr, ...(except.length > 0 && { except }) } };
  });
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: FETCHER_NETWORK_POLICY_NAME, namespace, labels: { [LABEL_MANAGED_BY]: MANAGED_BY_VALUE } },
    spec: {
      podSelector: { matchExpressions: [{ key: LABEL_PACKAGE_FETCHER, operator: 'Exists' }] },
      policyTypes: ['Ingress', 'Egress'],
      egress: [
        {
          ports: [
            { protocol: 'UDP', port: 53 },
            { protocol: 'TCP', port: 53 },
          ],
        },
        {
          to: peers,
          ports: [
            { protocol: 'TCP', port: 443 },
            { protocol: 'TCP', port: 80 },
          ],
        },
      ],
    },
  };
}
