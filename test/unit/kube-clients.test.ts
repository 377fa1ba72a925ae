// client-node builds a new HTTP agent (a new TLS connection) per request; makeClients makes the
// requests of one cluster and user share one. And which failed requests are worth trying again
// (retryable), shared by the audit writer and the run recorder.
import tls from 'node:tls';
import { HttpMethod, KubeConfig, RequestContext } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { makeClients, retryable, reuseConnections } from '../../src/kube/clients.js';

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

describe('retryable (whether a failed request may succeed when tried again)', () => {
  // client-node's ApiException: the status in `code`, the API server's Status as a JSON string in `body`.
  const apiErr = (code: number, message = 'x'): Error => Object.assign(new Error(`HTTP-Code: ${code}`), { code, body: JSON.stringify({ message }) });
  const sysErr = (code: string): Error => Object.assign(new Error(`connect ${code} 127.0.0.1:6443`), { code });
  const bigint = (): unknown => {
    try {
      return JSON.stringify({ n: 1n });
    } catch (err) {
      return err;
    }
  };
  it.each<[string, unknown, boolean]>([
    ['429: overloaded', apiErr(429), true],
    ['500', apiErr(500), true],
    ['503 while the API server starts', apiErr(503), true],
    ['504', apiErr(504), true],
    ["500 for etcd's request is too large: never fits", apiErr(500, 'etcdserver: request is too large'), false],
    ['400: a bad request', apiErr(400), false],
    ['413: too large', apiErr(413), false],
    ['403: not allowed (a ResourceQuota)', apiErr(403), false],
    ['404: the namespace is gone', apiErr(404), false],
    ['409: a conflict (callers that expect one retry it themselves)', apiErr(409), false],
    ['422: invalid', apiErr(422), false],
    ['refused (no answer)', sysErr('ECONNREFUSED'), true],
    ["fetch's TypeError with the socket error as its cause", new TypeError('fetch failed', { cause: sysErr('ECONNRESET') }), true],
    ['undici: no headers in time', Object.assign(new Error('Headers Timeout Error'), { code: 'UND_ERR_HEADERS_TIMEOUT' }), true],
    ["a request timeout (AbortSignal.timeout's TimeoutError)", new DOMException('The operation was aborted due to timeout', 'TimeoutError'), true],
    ['the same, as the cause of a wrapping error', new Error('request failed', { cause: new DOMException('timeout', 'TimeoutError') }), true],
    ['a TypeError building the body', new TypeError("Cannot read properties of undefined (reading 'name')"), false],
    ['a body that cannot be serialized', bigint(), false],
    ['a RangeError (a string too long)', new RangeError('Invalid string length'), false],
    ['an abort nobody asked for a timeout of', new DOMException('This operation was aborted', 'AbortError'), false],
    ['not an error', 'boom', false],
    ['nothing', undefined, false],
  ])('%s', (_what, err, expected) => {
    expect(retryable(err)).toBe(expected);
  });
});
