// An operator that has no session kernels (runtime/ missing next to its code) must refuse to
// start kernel pods with a clear error, and never write an empty runtime ConfigMap that would
// break the kernels of every other replica's pods in the namespace.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { RuntimeConfigMapGuard } from '../../../src/controller/runtime-guard.js';
import type { KubeClients } from '../../../src/kube/clients.js';

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
