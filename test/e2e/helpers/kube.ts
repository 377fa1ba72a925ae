// Test helpers for the real test cluster (test/cluster): clients from $KUBECONFIG, throwaway
// namespaces, waiting for pods, and exec with captured output. No fake API anywhere.
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { CoreV1Api, CustomObjectsApi, Exec, KubeConfig, NetworkingV1Api, type V1Pod } from '@kubernetes/client-node';
import { isWarm } from '../../../src/controller/pool-plan.js';

export interface TestKube {
  kc: KubeConfig;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  networking: NetworkingV1Api;
  exec: Exec;
}

export function testKube(): TestKube {
  const kc = new KubeConfig();
  kc.loadFromDefault();
  return {
    kc,
    core: kc.makeApiClient(CoreV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
    networking: kc.makeApiClient(NetworkingV1Api),
    exec: new Exec(kc),
  };
}

export const SANDBOX_IMAGE = 'codemode.local/sandbox:v1';

export async function createNamespace(k: TestKube, prefix: string): Promise<string> {
  const name = `${prefix}-${randomBytes(3).toString('hex')}`;
  await k.core.createNamespace({ body: { metadata: { name, labels: { 'codemode.dev/test': 'true' } } } });
  // Pods need the namespace's default ServiceAccount (created by the controller-manager).
  await until(
    async () => {
      try {
        await k.core.readNamespacedServiceAccount({ namespace: name, name: 'default' });
        return true;
      } catch {
        return false;
      }
    },
    30_000,
    `default ServiceAccount in ${name}`,
  );
  return name;
}

export async function deleteNamespace(k: TestKube, name: string): Promise<void> {
  // Retried for a while: a fault test beside this one may have the API server down just now, and
  // a namespace left behind keeps its pods on a developer's cluster for good.
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await k.core.deleteNamespace({ name, gracePeriodSeconds: 0 });
      return;
    } catch (err) {
      if ((err as { code?: number }).code === 404 || Date.now() > deadline) return;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

/** Polls `check` until it returns true (eventual consistency in tests, not a timing assertion). */
export async function until(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * The warm pool pods in `namespace` that are Ready and nobody's (isWarm: labelled
 * codemode.dev/pool=warm and not reserved, a replica's reservation being an annotation on such a
 * pod), with the labels of `selector` too (e.g. `codemode.dev/profile=slim`).
 */
export async function readyPoolPods(k: TestKube, namespace: string, selector?: string): Promise<V1Pod[]> {
  const pods = await k.core.listNamespacedPod({ namespace, labelSelector: ['codemode.dev/pool=warm', ...(selector ? [selector] : [])].join(',') });
  return pods.items.filter((p) => isWarm(p) && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
}

export function simplePod(name: string, command: string[], labels: Record<string, string> = {}): V1Pod {
  return {
    metadata: { name, labels },
    spec: {
      terminationGracePeriodSeconds: 0,
      // As in sandbox pods: the pause container (PID 1) reaps orphaned processes.
      shareProcessNamespace: true,
      containers: [{ name: 'main', image: SANDBOX_IMAGE, imagePullPolicy: 'Never', command }],
    },
  };
}

export async function runPod(k: TestKube, namespace: string, pod: V1Pod): Promise<V1Pod> {
  await k.core.createNamespacedPod({ namespace, body: pod });
  let latest: V1Pod | undefined;
  await until(
    async () => {
      latest = await k.core.readNamespacedPod({ namespace, name: pod.metadata?.name ?? '' });
      return latest.status?.phase === 'Running' && latest.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
    },
    90_000,
    `pod ${namespace}/${pod.metadata?.name} Running`,
  );
  return latest as V1Pod;
}

export interface Captured {
  stdout: string;
  stderr: string;
  exitCode: number | undefined;
  error?: string;
}

/** Runs a command in a pod through the exec API and collects its output and exit code. */
export function execCapture(k: TestKube, namespace: string, pod: string, command: string[], container = 'main'): Promise<Captured> {
  let stdout = '';
  let stderr = '';
  const sink = (append: (s: string) => void): Writable =>
    new Writable({
      write(chunk: Buffer, _e, cb): void {
        append(chunk.toString('utf8'));
        cb();
      },
    });
  return new Promise((resolve) => {
    let settled = false;
    const done = (r: Omit<Captured, 'stdout' | 'stderr'>): void => {
      if (settled) return;
      settled = true;
      resolve({ stdout, stderr, ...r });
    };
    k.exec
      .exec(
        namespace,
        pod,
        container,
        command,
        sink((s) => (stdout += s)),
        sink((s) => (stderr += s)),
        null,
        false,
        (status) => {
          if (status.status === 'Success') return done({ exitCode: 0 });
          const code = Number(status.details?.causes?.find((c) => c.reason === 'ExitCode')?.message);
          done(Number.isInteger(code) ? { exitCode: code } : { exitCode: undefined, error: status.message });
        },
      )
      .then((ws) => ws.on('close', () => setTimeout(() => done({ exitCode: undefined, error: 'closed without status' }), 100)))
      .catch((err: unknown) => done({ exitCode: undefined, error: String(err) }));
  });
}
