// The test cluster itself (issue: a real single-node Kubernetes): node, pods from the local
// sandbox image, exec, in-cluster API access through the kubernetes Service, and NetworkPolicy
// enforcement by kube-router — all against the real cluster that test/cluster/up.sh started.
import { execFileSync } from 'node:child_process';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { V1NetworkPolicy } from '@kubernetes/client-node';
import { createNamespace, deleteNamespace, execCapture, runPod, simplePod, testKube, until } from '../e2e/helpers/kube.js';

const k = testKube();
let ns = '';

beforeAll(async () => {
  ns = await createNamespace(k, 'cluster-test');
});
afterAll(async () => {
  await deleteNamespace(k, ns);
});

describe('test cluster', () => {
  it('has one Ready node running Kubernetes v1.34', async () => {
    const nodes = await k.core.listNode();
    expect(nodes.items).toHaveLength(1);
    const node = nodes.items[0];
    expect(node?.status?.nodeInfo?.kubeletVersion).toMatch(/^v1\.34\./);
    expect(node?.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
  });

  it('runs a pod from the locally built sandbox image and execs into it', async () => {
    await runPod(k, ns, simplePod('exec-target', ['sleep', 'infinity']));
    const ok = await execCapture(k, ns, 'exec-target', [
      'sh',
      '-c',
      'echo out; echo err >&2; python3 -c "import json,sqlite3,asyncio; print(json.dumps([1]))"; node -e "console.log(2)"',
    ]);
    expect(ok).toMatchObject({ exitCode: 0, stdout: 'out\n[1]\n2\n', stderr: 'err\n' });
    const failing = await execCapture(k, ns, 'exec-target', ['sh', '-c', 'echo bad >&2; exit 3']);
    expect(failing).toMatchObject({ exitCode: 3, stderr: 'bad\n' });
  });

  it('lets an in-cluster pod reach the API server through the kubernetes Service', async () => {
    await runPod(k, ns, simplePod('api-client', ['sleep', 'infinity']));
    const script = [
      'import os, ssl, urllib.request',
      'sa = "/var/run/secrets/kubernetes.io/serviceaccount"',
      'host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]',
      'ctx = ssl.create_default_context(cafile=sa + "/ca.crt")',
      'req = urllib.request.Request(f"https://{host}:{port}/version", headers={"Authorization": "Bearer " + open(sa + "/token").read()})',
      'print(host, urllib.request.urlopen(req, context=ctx, timeout=10).read().decode())',
    ].join('\n');
    const svc = await k.core.readNamespacedService({ namespace: 'default', name: 'kubernetes' });
    const r = await execCapture(k, ns, 'api-client', ['python3', '-c', script]);
    expect(r.stderr).toBe('');
    expect(r.exitCode).toBe(0);
    // The request went to the Service's ClusterIP (kube-proxy's iptables rules), not the node.
    expect(r.stdout.startsWith(`${svc.spec?.clusterIP} `)).toBe(true);
    expect(JSON.parse(r.stdout.slice(r.stdout.indexOf(' ') + 1))).toMatchObject({ gitVersion: expect.stringMatching(/^v1\.34\./) });
  });

  it('enforces a deny-all NetworkPolicy and lifts it when the policy is deleted', async () => {
    const payload = `payload-${Date.now()}`;
    const server = await runPod(
      k,
      ns,
      simplePod('np-server', ['sh', '-c', `mkdir -p /tmp/www && echo ${payload} > /tmp/www/data && cd /tmp/www && exec python3 -m http.server 8080`], {
        role: 'server',
      }),
    );
    await runPod(k, ns, simplePod('np-client', ['sleep', 'infinity'], { role: 'client' }));
    const url = `http://${server.status?.podIP}:8080/data`;
    const fetch = (): Promise<string> =>
      execCapture(k, ns, 'np-client', [
        'python3',
        '-c',
        `import urllib.request\ntry:\n print(urllib.request.urlopen("${url}", timeout=3).read().decode().strip())\nexcept Exception as e:\n print("FAILED", type(e).__name__)`,
      ]).then((r) => r.stdout.trim());

    // The server answers before any policy exists (the web server may need a moment to listen).
    await until(async () => (await fetch()) === payload, 30_000, 'server reachable before the policy');

    const policy: V1NetworkPolicy = {
      metadata: { name: 'deny-client' },
      spec: { podSelector: { matchLabels: { role: 'client' } }, policyTypes: ['Ingress', 'Egress'] },
    };
    await k.networking.createNamespacedNetworkPolicy({ namespace: ns, body: policy });
    // kube-router applies policies asynchronously; data must stop arriving (not just connects).
    await until(async () => (await fetch()).startsWith('FAILED'), 60_000, 'the deny-all policy to take effect');
    expect(await fetch()).not.toContain(payload);

    await k.networking.deleteNamespacedNetworkPolicy({ namespace: ns, name: 'deny-client' });
    await until(async () => (await fetch()) === payload, 60_000, 'traffic to flow again after deleting the policy');
  });

  // A connection kube-proxy does not rewrite to a pod (no Service has the address, or its rules
  // are missing) must fail on this node, not follow the default route off it (up.sh routes the
  // Service range to an empty bridge).
  it('keeps connections to a Service address nothing serves on the node', async () => {
    const taken = new Set((await k.core.listServiceForAllNamespaces()).items.flatMap((s) => s.spec?.clusterIPs ?? []));
    const ip = ['10.96.255.254', '10.96.255.253', '10.96.255.252'].find((a) => !taken.has(a));
    expect(ip, 'an address of the Service range that no Service has').toBeDefined();
    // The route first: without it nothing is tried (the packet would leave the machine).
    const route = execFileSync('ip', ['-4', 'route', 'get', ip ?? ''], { encoding: 'utf8' });
    expect(route).toMatch(/ dev codemode-svc0 /);
    const socket = connect({ host: ip, port: 80, timeout: 15_000 });
    const outcome = await new Promise<string>((resolve) => {
      socket.once('connect', () => resolve('connected'));
      socket.once('timeout', () => resolve('timed out'));
      socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    }).finally(() => socket.destroy());
    expect(outcome).toBe('EHOSTUNREACH');
  });
});
