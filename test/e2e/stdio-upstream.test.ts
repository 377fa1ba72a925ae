// A stdio UpstreamServer end to end: the reference filesystem MCP server (npm, in the test image
// codemode.local/mcp-filesystem:v1) run by the operator as a Deployment behind our bridge
// (codemode.local/stdio-bridge:v1), with its Service and NetworkPolicy. The operator runs in this
// process on the node's host, and reaches the bridge at the Service's ClusterIP. Sandbox code in
// a session calls the server through `codemode`; deleting the UpstreamServer removes what it owned.
import { DiscoveryV1Api, type V1Deployment, type V1NetworkPolicy, type V1Service } from '@kubernetes/client-node';
import { KubernetesObjectApi } from '@kubernetes/client-node/dist/object.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, UPSTREAMSERVER_PLURAL, VERSION, type UpstreamServerStatus } from '../../src/api/v1alpha1/index.js';
import { isNotFound } from '../../src/kube/clients.js';
import { createNamespace, deleteNamespace, execCapture, runPod, simplePod, testKube, until } from './helpers/kube.js';
import { stdioUrl } from '../../src/upstreams/stdio-objects.js';
import { serviceRouting } from './helpers/node-network.js';
import { createUpstream as createUpstreamIn, handshakeTrace, readyOf, upstreamStatus } from './helpers/upstream-servers.js';
import { connect, startOperator, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';

const k = testKube();
const objects = KubernetesObjectApi.makeApiClient(k.kc);
const discovery = k.kc.makeApiClient(DiscoveryV1Api);
const FILESYSTEM = {
  image: 'codemode.local/mcp-filesystem:v1',
  imagePullPolicy: 'Never',
  command: ['/usr/local/bin/node', '/app/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js'],
  // The pod's /tmp is an emptyDir: the only directory the server may touch.
  args: ['/tmp'],
};
let ns = '';
let op: RunningOperator;
let mcp: TestClient;

const createUpstream = (name: string, spec: Record<string, unknown>): Promise<void> => createUpstreamIn(k, ns, name, spec);
const statusOf = (name: string): Promise<UpstreamServerStatus | undefined> => upstreamStatus(k, ns, name);

/** Waits for `name` to be Ready; a timeout says what the status and the server's pods showed. */
async function readyWithin(name: string, ms: number, what: string): Promise<void> {
  try {
    await until(async () => readyOf(await statusOf(name)).status === 'True', ms, what);
  } catch (err) {
    const pods = (await k.core.listNamespacedPod({ namespace: ns, labelSelector: 'codemode.dev/upstream-server' })).items.map((p) => ({
      name: p.metadata?.name,
      phase: p.status?.phase,
      containers: p.status?.containerStatuses?.map((c) => ({ ready: c.ready, state: c.state })),
      conditions: p.status?.conditions?.map((c) => `${c.type}=${c.status}${c.reason ? `(${c.reason}: ${c.message})` : ''}`),
    }));
    // The bridge's log holds the servers' stderr and every session's start and end (how many
    // were live: each server's threads count against the pod's process limit).
    const logs = await Promise.all(
      pods.map(async (p) =>
        k.core
          .readNamespacedPodLog({ namespace: ns, name: p.name ?? '', container: 'server' })
          .then((l) => {
            const lines = l.split('\n');
            const count = (text: string): number => lines.filter((x) => x.includes(text)).length;
            return `--- ${p.name}: ${count(': started ')} sessions started, ${count(': ended: ')} ended; last lines:\n${lines.slice(-40).join('\n')}`;
          })
          .catch((e: unknown) => `--- ${p.name}: no log (${String(e).slice(0, 100)})`),
      ),
    );
    // Which pods the Service sends to, and the handshake made by hand: which request failed, and
    // whether the bridge (a JSON-RPC error body) or something else answered it.
    const slices = await discovery
      .listNamespacedEndpointSlice({ namespace: ns, labelSelector: `kubernetes.io/service-name=mcp-${name}` })
      .then((l) => JSON.stringify(l.items.flatMap((s) => (s.endpoints ?? []).map((e) => ({ addresses: e.addresses, ready: e.conditions?.ready })))))
      .catch((e: unknown) => `unreadable (${String(e).slice(0, 100)})`);
    const ip = (await read<V1Service>('v1', 'Service', `mcp-${name}`))?.spec?.clusterIP;
    const trace = ip ? await handshakeTrace(stdioUrl(ip)) : 'no ClusterIP to try';
    // How the node routes them (kube-proxy's rules, the connections it tracks unrewritten): a CI
    // run saw answers from off the node, a connection opened before the rules were written reused.
    const routing = ip ? await serviceRouting(ip) : '';
    throw new Error(
      `${(err as Error).message}; status ${JSON.stringify(await statusOf(name))}; pods ${JSON.stringify(pods)}; endpoints ${slices}\n${trace}\n${routing}\n${logs.join('\n')}`,
    );
  }
}

async function read<T>(apiVersion: string, kind: string, name: string): Promise<T | undefined> {
  try {
    return (await objects.read({ apiVersion, kind, metadata: { name, namespace: ns } })) as T;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

beforeAll(async () => {
  ns = await createNamespace(k, 'e2e-stdio');
  op = await startOperator(ns, { CODEMODE_UPSTREAM_HEALTH_INTERVAL_SECONDS: '1', CODEMODE_UPSTREAM_REQUEST_TIMEOUT_SECONDS: '10' });
  await createUpstream('files', { stdio: FILESYSTEM });
  mcp = await connect(op.url, 'current');
});
afterAll(async () => {
  await mcp?.close();
  await op?.stop();
  await deleteNamespace(k, ns);
});

const sc = (r: ToolResult): Record<string, unknown> => r.structuredContent ?? {};

describe('a stdio UpstreamServer run through the bridge', () => {
  it('becomes Ready with its tool count, in a hardened pod the UpstreamServer owns', async () => {
    await readyWithin('files', 180_000, 'the filesystem UpstreamServer to become Ready');
    const status = await statusOf('files');
    expect(readyOf(status).reason).toBe('CatalogLoaded');
    // The reference filesystem server lists 14 tools (read_text_file, write_file, list_directory, …).
    expect(status?.toolCount).toBeGreaterThanOrEqual(10);

    const d = await read<V1Deployment>('apps/v1', 'Deployment', 'mcp-files');
    expect(d?.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'UpstreamServer', name: 'files', controller: true });
    const pod = d!.spec!.template.spec!;
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(pod.containers[0]!.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    });
    const policy = await read<V1NetworkPolicy>('networking.k8s.io/v1', 'NetworkPolicy', 'mcp-files');
    // egress absent: None (no rule), so the server has no network at all.
    expect(policy?.spec?.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(policy?.spec?.egress ?? []).toEqual([]);
    const service = await read<V1Service>('v1', 'Service', 'mcp-files');
    expect(service?.spec?.clusterIP).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    // Each gateway stays on the pod that holds its session (a rollout runs two for a while).
    expect(service?.spec?.sessionAffinity).toBe('ClientIP');
    expect(pod.containers[0]!.command?.join(' ')).toContain('--idle-timeout 60s');
  }, 240_000);

  it('is called by sandbox code in a session through codemode', async () => {
    const created = await mcp.callTool('create_session', { language: 'python' });
    expect(created.isError ?? false, JSON.stringify(created.content)).toBe(false);
    const session = String(sc(created).session);
    const write = await mcp.callTool('execute_code', {
      session,
      timeout_seconds: 60,
      code:
        'from codemode import mcp, search\n' +
        'hits = str(search("write a file", limit=5))\n' +
        'mcp.files.write_file(path="/tmp/note.txt", content="hello from the sandbox")\n' +
        'listing = mcp.files.list_directory(path="/tmp")\n' +
        'hits',
    });
    expect(sc(write).phase, JSON.stringify(write.content)).toBe('Succeeded');
    expect(String(sc(write).result)).toContain('write_file');
    // The next call of the same session reads the file back and sees the listing kept in a variable.
    const back = await mcp.callTool('execute_code', {
      session,
      timeout_seconds: 60,
      code: 'from codemode import mcp\ntext = mcp.files.read_text_file(path="/tmp/note.txt")\n(str(text), "note.txt" in str(listing))',
    });
    expect(sc(back).phase, JSON.stringify(back.content)).toBe('Succeeded');
    expect(String(sc(back).result)).toContain('hello from the sandbox');
    expect(String(sc(back).result)).toContain('True');
  });

  it('rolls the Deployment out when the spec changes, and is Ready again', async () => {
    await k.custom.patchNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: UPSTREAMSERVER_PLURAL,
      name: 'files',
      body: [{ op: 'add', path: '/spec/stdio/maxSessions', value: 4 }],
    });
    await until(
      async () =>
        (await read<V1Deployment>('apps/v1', 'Deployment', 'mcp-files'))?.spec?.template.spec?.containers[0]?.command
          ?.join(' ')
          .includes('--max-sessions 4') === true,
      60_000,
      'the Deployment to run the bridge with --max-sessions 4',
    );
    await until(
      async () => {
        const s = await statusOf('files');
        return s?.observedGeneration === 2 && readyOf(s).status === 'True';
      },
      180_000,
      'the edited filesystem UpstreamServer to be Ready again',
    );
    expect((await statusOf('files'))?.toolCount).toBeGreaterThanOrEqual(10);
    // Ready for the new generation only once no pod of the old spec serves any more.
    const pods = await k.core.listNamespacedPod({ namespace: ns, labelSelector: 'codemode.dev/upstream-server=mcp-files' });
    for (const p of pods.items.filter((p) => !p.metadata?.deletionTimestamp)) expect(p.spec?.containers[0]?.command?.join(' ')).toContain('--max-sessions 4');
  }, 240_000);

  it('ends its MCP session in the bridge when a gateway stops (the server process goes with it)', async () => {
    await readyWithin('files', 180_000, 'the filesystem UpstreamServer to be Ready');
    const bridgeLog = async (): Promise<string> => {
      const pods = await k.core.listNamespacedPod({ namespace: ns, labelSelector: 'codemode.dev/upstream-server=mcp-files' });
      const live = pods.items.filter((p) => !p.metadata?.deletionTimestamp && p.status?.phase === 'Running');
      const logs = await Promise.all(live.map((p) => k.core.readNamespacedPodLog({ namespace: ns, name: p.metadata?.name ?? '' }).catch(() => '')));
      return logs.join('\n');
    };
    const count = (log: string, text: string | RegExp): number =>
      log.split('\n').filter((l) => (typeof text === 'string' ? l.includes(text) : text.test(l))).length;
    // Stopped mid-handshake (right after its server started) the replica aborts its initialize,
    // which ends the session in the bridge; stopped later, it sends DELETE. Either way the
    // session and its process end because of the client.
    const endedByClient = /ended: the client (ended the session|went away before its initialize was answered)/;
    const before = await bridgeLog();
    // A second replica connects (a new session, a new server process), then stops.
    const second = await startOperator(ns, { CODEMODE_UPSTREAM_HEALTH_INTERVAL_SECONDS: '1' });
    try {
      await until(async () => count(await bridgeLog(), ': started ') > count(before, ': started '), 120_000, "the second replica's session");
    } finally {
      await second.stop();
    }
    await until(async () => count(await bridgeLog(), endedByClient) > count(before, endedByClient), 30_000, 'the bridge to end the stopped replica’s session');
  }, 240_000);

  it("admits only the gateway's pods to the bridge", async () => {
    const ip = (await read<V1Service>('v1', 'Service', 'mcp-files'))?.spec?.clusterIP;
    const probe =
      'import sys, urllib.request\n' +
      'try:\n' +
      `    print(urllib.request.urlopen("http://${ip}:8080/healthz", timeout=5).read().decode().strip())\n` +
      'except Exception as e:\n' +
      '    print("blocked", type(e).__name__)\n';
    // The labels the gateway's pods carry (CODEMODE_STDIO_GATEWAY_POD_LABELS' default).
    await Promise.all([
      runPod(k, ns, simplePod('gateway-like', ['sleep', 'infinity'], { 'app.kubernetes.io/name': 'codemode-operator' })),
      runPod(k, ns, simplePod('other', ['sleep', 'infinity'])),
    ]);
    const [gateway, other] = await Promise.all([
      execCapture(k, ns, 'gateway-like', ['python3', '-c', probe]),
      execCapture(k, ns, 'other', ['python3', '-c', probe]),
    ]);
    expect(gateway.stdout.trim(), gateway.stderr).toBe('ok');
    expect(other.stdout.trim(), other.stderr).toMatch(/^blocked/);
  }, 180_000);

  it('gives the server no network with egress None (the default)', async () => {
    const pods = await k.core.listNamespacedPod({ namespace: ns, labelSelector: 'codemode.dev/upstream-server=mcp-files' });
    const pod = pods.items.find((p) => !p.metadata?.deletionTimestamp && p.status?.phase === 'Running');
    expect(pod, 'a running filesystem server pod').toBeDefined();
    // The image is the sandbox rootfs plus Node, so python3 is there to try the API server.
    const r = await execCapture(
      k,
      ns,
      pod!.metadata!.name!,
      [
        'python3',
        '-c',
        'import os, socket\ntry:\n    socket.create_connection((os.environ["KUBERNETES_SERVICE_HOST"], int(os.environ["KUBERNETES_SERVICE_PORT"])), 5); print("connected")\nexcept Exception as e:\n    print("blocked", type(e).__name__)',
      ],
      'server',
    );
    // A timeout or a refusal: not a missing variable or python error.
    expect(r.stdout.trim(), r.stderr).toMatch(/^blocked (TimeoutError|timeout|ConnectionRefusedError|OSError)$/);
  }, 60_000);

  it('reports an image that cannot be pulled as Ready False with the reason', async () => {
    await createUpstream('broken', { stdio: { ...FILESYSTEM, image: 'codemode.local/no-such-server:v1' } });
    await until(async () => readyOf(await statusOf('broken')).reason === 'ServerFailing', 150_000, 'the broken UpstreamServer to report ServerFailing');
    const ready = readyOf(await statusOf('broken'));
    expect(ready.status).toBe('False');
    expect(ready.message).toMatch(/container server: ErrImageNeverPull/);
    expect((await statusOf('broken'))?.lastError).toMatch(/ErrImageNeverPull/);
  }, 180_000);

  // The kubelet reads a stdio server's Secret variables, not the gateway: the gateway reads each
  // first, so a spec cannot name a Secret past its RBAC (upstreams.secretNames).
  it('starts no server whose Secret variable the gateway cannot read, and says why', async () => {
    await createUpstream('secretive', { stdio: { ...FILESYSTEM, env: [{ name: 'TOKEN', secretKeyRef: { name: 'no-such-secret', key: 'token' } }] } });
    await until(async () => readyOf(await statusOf('secretive')).reason === 'SecretNotFound', 60_000, 'SecretNotFound');
    expect(readyOf(await statusOf('secretive')).message).toMatch(/no-such-secret/);
    expect(await read<V1Deployment>('apps/v1', 'Deployment', 'mcp-secretive')).toBeUndefined();
  }, 90_000);

  it('removes the Deployment, Service and NetworkPolicy when the UpstreamServer is deleted', async () => {
    await k.custom.deleteNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: UPSTREAMSERVER_PLURAL, name: 'files' });
    await until(
      async () =>
        (await read('apps/v1', 'Deployment', 'mcp-files')) === undefined &&
        (await read('v1', 'Service', 'mcp-files')) === undefined &&
        (await read('networking.k8s.io/v1', 'NetworkPolicy', 'mcp-files')) === undefined,
      120_000,
      "the server's objects to be garbage-collected",
    );
    const r = await mcp.callTool('execute_code', { code: 'from codemode import servers\n[s["name"] for s in servers()]', timeout_seconds: 60 });
    expect(String(sc(r).result), JSON.stringify(r.content)).not.toContain("'files'");
  });
});
