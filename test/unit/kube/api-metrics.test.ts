// Kubernetes API requests are counted by verb and a result from a closed set (issue 10: the
// dashboard's "API errors"). The status → result mapping is pure; the hook in makeClients is
// checked here against an address where nothing listens (a request with no answer), and on the
// real API server in test/e2e/kube-api-metrics.test.ts.
import { ApiException, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { resourceOf, resultOfError, resultOfStatus, verbOf, type KubeApiMetrics } from '../../../src/kube/api-metrics.js';
import { makeClients } from '../../../src/kube/clients.js';
import { createMetrics } from '../../../src/metrics/registry.js';

describe('resultOfStatus', () => {
  it.each([
    [200, 'success'],
    [201, 'success'],
    [204, 'success'],
    [400, 'invalid'],
    [422, 'invalid'],
    [401, 'unauthorized'],
    [403, 'forbidden'],
    [404, 'not_found'],
    [409, 'conflict'],
    [410, 'gone'],
    [413, 'too_large'],
    [429, 'throttled'],
    [500, 'server_error'],
    [503, 'server_error'],
    [504, 'server_error'],
    [301, 'other'],
    [405, 'other'],
    [418, 'other'],
    [600, 'other'],
    [0, 'other'],
  ] as const)('%i → %s', (status, result) => {
    expect(resultOfStatus(status)).toBe(result);
  });
});

describe('resultOfError', () => {
  it.each([
    ['an ApiException', new ApiException(409, 'Conflict', '{}', {}), 'conflict'],
    ['a failed watch', Object.assign(new Error('Gone'), { statusCode: 410 }), 'gone'],
    ['an exec refused by the API server', Object.assign(new Error('Unexpected server response: 403'), {}), 'forbidden'],
    ['an exec to a missing pod', { message: 'Unexpected server response: 404' }, 'not_found'],
    ['a refused connection', Object.assign(new TypeError('fetch failed'), { cause: { code: 'ECONNREFUSED' } }), 'network'],
    ['a time-out', new DOMException('The operation was aborted due to timeout', 'TimeoutError'), 'network'],
    ['an error code that is a string', Object.assign(new Error('reset'), { code: 'ECONNRESET' }), 'network'],
    ['no error object', undefined, 'network'],
  ])('%s', (_name, err, result) => {
    expect(resultOfError(err)).toBe(result);
  });
});

describe('verbOf and resourceOf', () => {
  it.each([
    ['GET', 'GET'],
    ['post', 'POST'],
    ['PATCH', 'PATCH'],
    ['PUT', 'PUT'],
    ['DELETE', 'DELETE'],
    ['HEAD', 'other'],
    ['CONNECT', 'other'],
  ])('verb %s → %s', (method, verb) => {
    expect(verbOf(method)).toBe(verb);
  });

  it.each([
    ['/api/v1/namespaces/ns/pods', 'pods'],
    ['/apis/codemode.dev/v1alpha1/namespaces/ns/sandboxruns', 'sandboxruns'],
    ['/apis/codemode.dev/v1alpha1/namespaces/ns/sandboxsessions', 'sandboxsessions'],
    ['/apis/codemode.dev/v1alpha1/namespaces/ns/upstreamservers', 'upstreamservers'],
    ['/apis/networking.k8s.io/v1/namespaces/ns/networkpolicies?x=1', 'networkpolicies'],
    ['/api/v1/namespaces/ns/secrets', 'other'],
    ['', 'other'],
  ])('resource of %s → %s', (path, resource) => {
    expect(resourceOf(path)).toBe(resource);
  });
});

/** A cluster where nothing listens: every request fails without an HTTP answer. */
function unreachable(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'http://127.0.0.1:1', skipTLSVerify: true }],
    users: [{ name: 'u', token: 't' }],
    contexts: [{ name: 'ctx', cluster: 'c', user: 'u' }],
    currentContext: 'ctx',
  });
  return kc;
}

describe('makeClients counts requests', () => {
  it('counts a request that got no answer as network, and the caller sees the same error', async () => {
    const metrics = createMetrics();
    const clients = makeClients(unreachable(), metrics.kubeApi);
    const err = await clients.core.readNamespacedPod({ name: 'p', namespace: 'n' }).catch((e: unknown) => e);
    const uncounted = await makeClients(unreachable())
      .core.readNamespacedPod({ name: 'p', namespace: 'n' })
      .catch((e: unknown) => e);
    expect(String(err)).toBe(String(uncounted));
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/^codemode_kube_api_requests_total\{verb="GET",result="network"\} 1$/m);
    expect(text).toMatch(/^codemode_kube_api_requests_total\{verb="PATCH",result="conflict"\} 0$/m);
    expect(text).toMatch(/^codemode_kube_informer_restarts_total\{resource="pods"\} 0$/m);
  });

  it('counts clients made later on the same KubeConfig (the auth layer makes its own)', async () => {
    const metrics = createMetrics();
    const kc = unreachable();
    makeClients(kc, metrics.kubeApi);
    await kc
      .makeApiClient(CoreV1Api)
      .deleteNamespacedPod({ name: 'p', namespace: 'n' })
      .catch(() => undefined);
    expect(await metrics.registry.metrics()).toMatch(/^codemode_kube_api_requests_total\{verb="DELETE",result="network"\} 1$/m);
  });

  it('counts an exec that could not connect as CONNECT', async () => {
    const metrics = createMetrics();
    const clients = makeClients(unreachable(), metrics.kubeApi);
    await expect(clients.exec.exec('n', 'p', 'c', ['true'], null, null, null, false)).rejects.toBeDefined();
    expect(await metrics.registry.metrics()).toMatch(/^codemode_kube_api_requests_total\{verb="CONNECT",result="network"\} 1$/m);
  });

  it('never lets a failing counter change the request', async () => {
    const throwing: KubeApiMetrics = {
      request: () => {
        throw new Error('counter broken');
      },
      informerRestarted: () => {
        throw new Error('counter broken');
      },
    };
    const clients = makeClients(unreachable(), throwing);
    const err = await clients.core.readNamespacedPod({ name: 'p', namespace: 'n' }).catch((e: unknown) => e);
    expect(String(err)).not.toContain('counter broken');
    await expect(clients.exec.exec('n', 'p', 'c', ['true'], null, null, null, false)).rejects.not.toThrow('counter broken');
  });
});
