// client-node builds a new HTTP agent (a new TLS connection) per request; makeClients makes the
// requests of one cluster and user share one.
import tls from 'node:tls';
import { HttpMethod, KubeConfig, RequestContext } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { makeClients, reuseConnections } from '../../src/kube/clients.js';

function config(ca = 'not a real CA'): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', caData: Buffer.from(ca).toString('base64'), skipTLSVerify: false }],
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

describe('shared TLS contexts for exec websockets', () => {
  const httpsOptions = async (kc: KubeConfig): Promise<{ secureContext?: tls.SecureContext; ca?: unknown }> => {
    const opts = {};
    await kc.applyToHTTPSOptions(opts);
    return opts;
  };
  // Two real CA certificates (Node's bundled roots) stand in for two clusters' CAs.
  const [caA, caB] = tls.rootCertificates;

  it('is needed: without it every websocket builds its own SecureContext', async () => {
    expect((await httpsOptions(config(caA))).secureContext).toBeUndefined();
  });

  it('gives every websocket with the same TLS material one SecureContext, keeping the options', async () => {
    const kc = config(caA);
    makeClients(kc);
    const a = await httpsOptions(kc);
    expect(a.secureContext).toBeInstanceOf(Object);
    expect(a.ca).toBeDefined();
    expect((await httpsOptions(kc)).secureContext).toBe(a.secureContext);
    const other = config(caB);
    makeClients(other);
    expect((await httpsOptions(other)).secureContext).not.toBe(a.secureContext);
  });
});
