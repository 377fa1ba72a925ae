// stdio UpstreamServers: what spec.stdio accepts and refuses, the Deployment / Service /
// NetworkPolicy the leader applies (pure builders), and the health read from the Deployment and pods.
import type { V1ContainerStatus, V1Deployment, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { parseUpstreamServer, type StdioServer, type UpstreamServer } from '../../src/api/v1alpha1/index.js';
import { stdioHealth } from '../../src/upstreams/stdio-health.js';
import {
  ANNOTATION_STDIO_HASH,
  buildStdioDeployment,
  buildStdioNetworkPolicy,
  buildStdioService,
  stdioSessionIdleSeconds,
  egressRules,
  parseLabels,
  stdioObjectName,
  stdioUrl,
  type StdioOptions,
} from '../../src/upstreams/stdio-objects.js';

const obj = (spec: Record<string, unknown>): unknown => ({ apiVersion: 'codemode.dev/v1alpha1', kind: 'UpstreamServer', metadata: { name: 'fs' }, spec });
const fs = { image: 'codemode.local/mcp-filesystem:v1', command: ['node', '/app/index.js'], args: ['/tmp'] };

function server(stdio: Record<string, unknown> = fs): { server: UpstreamServer; stdio: StdioServer } {
  const r = parseUpstreamServer({
    apiVersion: 'codemode.dev/v1alpha1',
    kind: 'UpstreamServer',
    metadata: { name: 'fs', namespace: 'tools', uid: 'u-1', generation: 1 },
    spec: { stdio },
  });
  if (!r.ok) throw new Error(r.message);
  return { server: r.server, stdio: r.server.spec.stdio! };
}
const opts: StdioOptions = {
  bridgeImage: 'codemode.local/stdio-bridge:v1',
  gatewayPodLabels: { 'app.kubernetes.io/name': 'codemode-operator' },
  sessionIdleSeconds: 90,
};

describe('spec.stdio', () => {
  it.each<[string, Record<string, unknown>]>([
    ['image and command', { stdio: fs }],
    [
      'env values and Secret keys',
      {
        stdio: {
          ...fs,
          env: [
            { name: 'A', value: '1' },
            { name: 'TOKEN', secretKeyRef: { name: 'gh', key: 'token' } },
          ],
        },
      },
    ],
    ['egress All', { stdio: { ...fs, egress: { allow: 'All' } } }],
    ['egress Rules', { stdio: { ...fs, egress: { allow: 'Rules', rules: [{ to: [{ ipBlock: { cidr: '10.0.0.0/8' } }] }] } } }],
    ['resources and a working directory', { stdio: { ...fs, workingDir: '/srv', resources: { limits: { memory: '1Gi', cpu: '1' } } } }],
  ])('accepts %s', (_name, spec) => {
    expect(parseUpstreamServer(obj(spec)).ok).toBe(true);
  });

  it.each<[string, Record<string, unknown>, RegExp]>([
    ['both url and stdio', { url: 'http://x/mcp', stdio: fs }, /spec set exactly one of url .* and stdio/],
    ['no command', { stdio: { image: 'x' } }, /spec\.stdio\.command is required/],
    ['an empty command', { stdio: { image: 'x', command: [] } }, /spec\.stdio\.command must be at least 1 item/],
    [
      'an env var with value and Secret',
      { stdio: { ...fs, env: [{ name: 'A', value: '1', secretKeyRef: { name: 'a', key: 'b' } }] } },
      /exactly one of value and secretKeyRef/,
    ],
    ['an env var with neither', { stdio: { ...fs, env: [{ name: 'A' }] } }, /exactly one of value and secretKeyRef/],
    ['Rules without rules', { stdio: { ...fs, egress: { allow: 'Rules' } } }, /rules must be given \(non-empty\) exactly when allow is Rules/],
    ['rules with allow All', { stdio: { ...fs, egress: { allow: 'All', rules: [{}] } } }, /rules must be given/],
    ['an unknown egress mode', { stdio: { ...fs, egress: { allow: 'Some' } } }, /spec\.stdio\.egress\.allow/],
    ['a relative working directory', { stdio: { ...fs, workingDir: 'srv' } }, /must be an absolute path/],
    ['a bad quantity', { stdio: { ...fs, resources: { limits: { memory: 'lots' } } } }, /must be a Kubernetes quantity/],
    // The kubelet reads a limit of 0 as none at all.
    ['a limit of zero', { stdio: { ...fs, resources: { limits: { memory: '0' } } } }, /must be a Kubernetes quantity above zero/],
    ['a quantity past 64 characters', { stdio: { ...fs, resources: { limits: { cpu: '1'.repeat(65) } } } }, /spec\.stdio\.resources\.limits\.cpu/],
  ])('refuses %s with a message that says what to write', (_name, spec, message) => {
    const r = parseUpstreamServer(obj(spec));
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.message).toMatch(message);
  });
});

describe('stdio objects', () => {
  it.each<[string, string]>([
    ['fs', 'mcp-fs'],
    ['github.tools', 'mcp-github-tools-'],
    ['a'.repeat(100), 'mcp-aaaa'],
  ])('names the objects of %s like %s (DNS-1035, at most 63 characters)', (name, prefix) => {
    const n = stdioObjectName(name);
    expect(n.startsWith(prefix)).toBe(true);
    expect(n).toMatch(/^[a-z]([-a-z0-9]*[a-z0-9])?$/);
    expect(n.length).toBeLessThanOrEqual(63);
  });

  it.each<[string, string]>([
    ['10.96.0.10', 'http://10.96.0.10:8080/mcp'],
    ['fd00::a', 'http://[fd00::a]:8080/mcp'],
  ])('connects to the ClusterIP %s as %s', (ip, url) => expect(stdioUrl(ip)).toBe(url));

  it('parses the gateway pod labels', () => {
    expect(parseLabels('app.kubernetes.io/name=codemode-operator,app.kubernetes.io/instance=x')).toEqual({
      'app.kubernetes.io/name': 'codemode-operator',
      'app.kubernetes.io/instance': 'x',
    });
  });

  it('runs the server image behind the bridge, hardened, owned by the UpstreamServer', () => {
    const { server: s, stdio } = server({ ...fs, env: [{ name: 'TOKEN', secretKeyRef: { name: 'gh', key: 'token' } }] });
    const d = buildStdioDeployment(s, stdio, opts);
    expect(d.metadata?.ownerReferences).toEqual([{ apiVersion: 'codemode.dev/v1alpha1', kind: 'UpstreamServer', name: 'fs', uid: 'u-1', controller: true }]);
    const pod = d.spec!.template.spec!;
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(pod.initContainers![0]).toMatchObject({ image: opts.bridgeImage, command: ['/bridge', 'install', '/codemode-bridge/bridge'] });
    const c = pod.containers[0]!;
    expect(c.command).toEqual([
      '/codemode-bridge/bridge',
      '--listen',
      ':8080',
      '--max-sessions',
      '8',
      '--idle-timeout',
      '90s',
      '--',
      'node',
      '/app/index.js',
      '/tmp',
    ]);
    for (const sc of [c.securityContext, pod.initContainers![0]!.securityContext])
      expect(sc).toEqual({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: { drop: ['ALL'] } });
    expect(c.env).toEqual([
      { name: 'HOME', value: '/tmp' },
      { name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'gh', key: 'token' } } },
    ]);
    expect(c.readinessProbe).toEqual({ httpGet: { path: '/healthz', port: 'mcp' }, periodSeconds: 5, timeoutSeconds: 5, failureThreshold: 3 });
    expect(c.volumeMounts?.map((m) => m.mountPath)).toEqual(['/codemode-bridge', '/tmp']);
    expect(d.spec!.selector.matchLabels).toEqual(d.spec!.template.metadata!.labels && { 'codemode.dev/upstream-server': 'mcp-fs' });
  });

  it('changes the hash annotation exactly when the spec changes', () => {
    const a = buildStdioDeployment(server().server, server().stdio, opts).metadata!.annotations![ANNOTATION_STDIO_HASH];
    const again = buildStdioDeployment(server().server, server().stdio, opts).metadata!.annotations![ANNOTATION_STDIO_HASH];
    const b = buildStdioDeployment(server({ ...fs, args: ['/data'] }).server, server({ ...fs, args: ['/data'] }).stdio, opts).metadata!.annotations![
      ANNOTATION_STDIO_HASH
    ];
    expect(a).toBe(again);
    expect(a).not.toBe(b);
  });

  it.each<[number, number]>([
    [1, 60],
    [15, 60],
    [16, 64],
    [600, 2400],
  ])('a gateway pinging every %i s: the bridge ends sessions silent for %i s', (health, idle) => {
    expect(stdioSessionIdleSeconds(health)).toBe(idle);
  });

  it('exposes the bridge port on a ClusterIP Service, each client kept on one pod', () => {
    expect(buildStdioService(server().server).spec).toEqual({
      type: 'ClusterIP',
      sessionAffinity: 'ClientIP',
      selector: { 'codemode.dev/upstream-server': 'mcp-fs' },
      ports: [{ name: 'mcp', port: 8080, targetPort: 'mcp', protocol: 'TCP' }],
    });
  });

  it.each<[string, Record<string, unknown> | undefined, unknown[]]>([
    ['absent: no egress at all', undefined, []],
    ['None', { allow: 'None' }, []],
    ['All', { allow: 'All' }, [{}]],
    [
      'Rules, plus DNS',
      { allow: 'Rules', rules: [{ to: [{ ipBlock: { cidr: '140.82.112.0/20' } }], ports: [{ port: 443, protocol: 'TCP' }] }] },
      [
        { to: [{ ipBlock: { cidr: '140.82.112.0/20' } }], ports: [{ port: 443, protocol: 'TCP' }] },
        {
          ports: [
            { port: 53, protocol: 'UDP' },
            { port: 53, protocol: 'TCP' },
          ],
        },
      ],
    ],
  ])('egress %s', (_name, egress, rules) => {
    expect(egressRules(server({ ...fs, ...(egress && { egress }) }).stdio)).toEqual(rules);
  });

  it.each<[string, string | undefined, Record<string, unknown>]>([
    ['the same namespace', undefined, { podSelector: { matchLabels: opts.gatewayPodLabels } }],
    [
      'another namespace',
      'codemode-system',
      { podSelector: { matchLabels: opts.gatewayPodLabels }, namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'codemode-system' } } },
    ],
  ])('admits only the gateway pods from %s, on the bridge port', (_name, gatewayNamespace, peer) => {
    const p = buildStdioNetworkPolicy(server().server, server().stdio, { ...opts, ...(gatewayNamespace && { gatewayNamespace }) });
    // Apply bodies are sent as written: the wire name `from`, not client-node's `_from`.
    const wire = JSON.parse(JSON.stringify(p)) as { spec: { ingress: unknown[]; policyTypes: string[] } };
    expect(wire.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(wire.spec.ingress).toEqual([{ from: [peer], ports: [{ port: 8080, protocol: 'TCP' }] }]);
  });
});

const deployment = (status: Record<string, unknown>, generation = 1): V1Deployment => ({ metadata: { name: 'mcp-fs', generation }, status }) as V1Deployment;
const pod = (statuses: Partial<V1ContainerStatus>[], init: Partial<V1ContainerStatus>[] = []): V1Pod =>
  ({ metadata: { name: 'mcp-fs-1' }, status: { containerStatuses: statuses, initContainerStatuses: init } }) as V1Pod;

describe('stdioHealth', () => {
  it.each<[string, V1Deployment | undefined, V1Pod[], string | undefined, string, RegExp | undefined]>([
    ['no Deployment yet', undefined, [], undefined, 'ServerStarting', /Creating the server's Deployment/],
    ['an apply error', undefined, [], 'NetworkPolicy mcp-fs: invalid', 'ServerFailing', /could not apply .*NetworkPolicy mcp-fs: invalid/],
    ['available', deployment({ observedGeneration: 1, replicas: 1, availableReplicas: 1, updatedReplicas: 1 }), [], undefined, 'available', undefined],
    [
      'a rollout with the old pod still serving',
      deployment({ observedGeneration: 1, replicas: 2, availableReplicas: 1, updatedReplicas: 1 }),
      [],
      undefined,
      'ServerStarting',
      /Waiting/,
    ],
    ['a rollout not yet seen', deployment({ observedGeneration: 1, availableReplicas: 1, updatedReplicas: 1 }, 2), [], undefined, 'ServerStarting', /Waiting/],
    [
      'an image that cannot be pulled',
      deployment({ observedGeneration: 1 }),
      [pod([{ name: 'server', state: { waiting: { reason: 'ImagePullBackOff', message: 'Back-off pulling image "nope:v1"' } } }])],
      undefined,
      'ServerFailing',
      /Pod mcp-fs-1: container server: ImagePullBackOff: Back-off pulling image "nope:v1"/,
    ],
    [
      'a bridge image that cannot be pulled',
      deployment({ observedGeneration: 1 }),
      [pod([], [{ name: 'install-bridge', state: { waiting: { reason: 'ErrImagePull' } } }])],
      undefined,
      'ServerFailing',
      /container install-bridge: ErrImagePull/,
    ],
    [
      'a crash loop',
      deployment({ observedGeneration: 1 }),
      [pod([{ name: 'server', state: { waiting: { reason: 'CrashLoopBackOff' } }, lastState: { terminated: { exitCode: 2, reason: 'Error' } } }])],
      undefined,
      'ServerFailing',
      /CrashLoopBackOff \(last exit code 2, Error\)/,
    ],
    [
      'an old Deployment while the edited spec is applied',
      deployment({ observedGeneration: 1, availableReplicas: 1, updatedReplicas: 1 }),
      [],
      undefined,
      'ServerStarting',
      /Applying the changed spec/,
    ],
    [
      'a pod still creating',
      deployment({ observedGeneration: 1 }),
      [pod([{ name: 'server', state: { waiting: { reason: 'ContainerCreating' } } }])],
      undefined,
      'ServerStarting',
      /Waiting/,
    ],
    [
      'pods refused',
      deployment({ observedGeneration: 1, conditions: [{ type: 'ReplicaFailure', status: 'True', reason: 'FailedCreate', message: 'exceeded quota' }] }),
      [],
      undefined,
      'ServerFailing',
      /FailedCreate: exceeded quota/,
    ],
  ])('%s', (name, d, pods, applyError, expected, message) => {
    // The Deployments here carry no hash annotation: one case asks for a newer spec's.
    const h = stdioHealth(d, pods, applyError, name.startsWith('an old Deployment') ? 'new-hash' : undefined);
    if (expected === 'available') return expect(h).toEqual({ available: true });
    expect(h).toMatchObject({ available: false, reason: expected });
    if (!h.available) expect(h.message).toMatch(message!);
  });
});
