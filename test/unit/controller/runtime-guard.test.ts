// An operator that has no session kernels (runtime/ missing next to its code) must refuse to
// start kernel pods with a clear error, and never write an empty runtime ConfigMap that would
// break the kernels of every other replica's pods in the namespace.
import type { V1ConfigMap } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { RuntimeConfigMapGuard } from '../../../src/controller/runtime-guard.js';
import type { KubeClients } from '../../../src/kube/clients.js';
import { buildRuntimeConfigMap } from '../../../src/sandbox/runtime-configmap.js';

describe('RuntimeConfigMapGuard without runtime files', () => {
  it('refuses with what is missing and what to do, making no API request', async () => {
    const requests: string[] = [];
    // Records any use of the clients: the guard must not touch the API at all.
    const clients = new Proxy({}, { get: (_t, prop) => (requests.push(String(prop)), undefined) }) as unknown as KubeClients;
    const guard = new RuntimeConfigMapGuard(clients, {}, pino({ level: 'silent' }));
    await expect(guard.ensure('team-a')).rejects.toThrow(/no session kernels \(runtime\/ was not found.*run it from a checkout or the gateway image/);
    expect(requests).toEqual([]);
  });
});

// The runtime ConfigMap's name is the hash of its files, so the operator never writes anything
// else under it. One found with other content was put there by someone who may create ConfigMaps
// in the namespace (the name is computable from the released runtime/): mounted, it would be the
// kernel of every sandbox pod, with every user's code, output and tool calls.
describe('RuntimeConfigMapGuard with a ConfigMap it did not write', () => {
  const files = { 'python/kernel.py': 'print("kernel")\n' };
  const ours = buildRuntimeConfigMap('team-a', files);
  const apiError = (code: number): Error => Object.assign(new Error(`HTTP ${code}`), { code });

  /** A ConfigMap store of one namespace: the guard's requests, in order. */
  function store(initial: V1ConfigMap | undefined, onCreate?: () => V1ConfigMap | undefined) {
    let cm = initial;
    const requests: string[] = [];
    const core = {
      readNamespacedConfigMap: async (): Promise<V1ConfigMap> => {
        requests.push('read');
        if (!cm) throw apiError(404);
        return cm;
      },
      deleteNamespacedConfigMap: async (): Promise<void> => {
        requests.push('delete');
        cm = undefined;
      },
      createNamespacedConfigMap: async ({ body }: { body: V1ConfigMap }): Promise<V1ConfigMap> => {
        requests.push('create');
        const raced = onCreate?.();
        if (raced) cm = raced;
        if (cm) throw apiError(409);
        cm = { ...body, metadata: { ...body.metadata, uid: 'mine' } };
        return cm;
      },
      patchNamespacedConfigMap: async (): Promise<V1ConfigMap> => {
        requests.push('patch');
        return cm as V1ConfigMap;
      },
    };
    const guard = new RuntimeConfigMapGuard({ core } as unknown as KubeClients, files, pino({ level: 'silent' }));
    return { guard, requests, current: (): V1ConfigMap | undefined => cm };
  }

  const forged = (patch: Partial<V1ConfigMap>): V1ConfigMap => ({ ...ours, metadata: { ...ours.metadata, uid: 'theirs' }, ...patch });

  it.each<[string, V1ConfigMap]>([
    ['other kernel code', forged({ data: { python__kernel: 'import os; steal()\n' } })],
    ['an extra file', forged({ data: { ...ours.data, 'python__sitecustomize.py': 'steal()\n' } })],
    ['the right files, but mutable (the kubelet would refresh them in running pods)', forged({ immutable: false })],
    ['the right files and binaryData besides', forged({ binaryData: { x: 'AA==' } })],
  ])('replaces one with %s by its own', async (_name, foreign) => {
    const s = store(foreign);
    await s.guard.ensure('team-a');
    expect(s.requests).toEqual(['read', 'delete', 'create']);
    expect(s.current()?.data).toEqual(ours.data);
    expect(s.current()?.immutable).toBe(true);
  });

  it('keeps its own, reading it only', async () => {
    const s = store({ ...ours, metadata: { ...ours.metadata, uid: 'mine' } });
    await s.guard.ensure('team-a');
    expect(s.requests).toEqual(['read']);
  });

  it.each<[string, V1ConfigMap, boolean]>([
    ['another replica of this version', { ...ours, metadata: { ...ours.metadata, uid: 'replica-2' } }, true],
    ['someone else', forged({ data: { python__kernel: 'steal()\n' } }), false],
  ])("after losing the create to %s, goes on only with this version's runtime", async (_name, raced, ok) => {
    const s = store(undefined, () => raced);
    const ensured = s.guard.ensure('team-a');
    if (ok) await expect(ensured).resolves.toBeUndefined();
    else await expect(ensured).rejects.toThrow(/not this version's runtime, so no kernel pod is started with it/);
    expect(s.requests).toEqual(['read', 'create', 'read']);
  });
});
