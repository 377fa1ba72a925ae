// client-node builds a new HTTP agent (a new TLS connection) per request; makeClients makes the
// requests of one cluster and user share one.
import { HttpMethod, KubeConfig, RequestContext } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { makeClients, reuseConnections } from '../../src/kube/clients.js';

function config(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', caData: Buffer.from('not a real CA').toString('base64'), skipTLSVerify: false }],
    users: [{ name: 'u', token: 'secret-token' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return kc;
}

async function dispatcherOf(kc: KubeConfig): Promise<unknown> {
  const ctx = new RequestContext('https://127.0.0.1:6443/api/v1/namespaces', HttpMethod.GET);
  await kc.applySecurityAuthentication(ctx);
  expect(ctx.getHeaders().Authorization).toBe('Bearer secret-token');
  return ctx.getDispatcher();
}

describe('reuseConnections', () => {
  it('is needed: without it every request gets a new dispatcher', async () => {
    const kc = config();
    const a = await dispatcherOf(kc);
    expect(a).toBeDefined();
    expect(await dispatcherOf(kc)).not.toBe(a);
  });

  it('gives every request of one cluster and user the same dispatcher', async () => {
    const kc = config();
    makeClients(kc);
    reuseConnections(kc); // idempotent
    const a = await dispatcherOf(kc);
    expect(a).toBeDefined();
    expect(await dispatcherOf(kc)).toBe(a);
  });
});
