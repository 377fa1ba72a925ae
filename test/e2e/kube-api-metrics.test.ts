// Kubernetes API errors are counted (issue 10): real failing requests against the real API server,
// made through the process's own clients (makeClients with the metrics wired as main.ts wires
// them), show in the /metrics text by verb and result — and nothing of the request (namespace,
// object names) becomes a label. Deltas, never exact totals: only this file's clients count here,
// but a retry inside the API machinery must not make the test flaky.
import { Hono } from 'hono';
import type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeClients, type KubeClients } from '../../src/kube/clients.js';
import { ResilientInformer } from '../../src/kube/informer.js';
import { createMetrics, type Metrics } from '../../src/metrics/registry.js';
import { serveMetrics } from '../../src/metrics/route.js';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';

const k = testKube();
let ns = '';
let metrics: Metrics;
let clients: KubeClients;
const app = new Hono();

beforeAll(async () => {
  ns = await createNamespace(k, 'kube-api-metrics');
  metrics = createMetrics();
  clients = makeClients(testKube().kc, metrics.kubeApi);
  serveMetrics(app, metrics.registry);
});
afterAll(async () => {
  if (ns) await deleteNamespace(k, ns);
});

/** GET /metrics as Prometheus scrapes it. */
async function scrape(): Promise<string> {
  const res = await app.request('/metrics');
  expect(res.status).toBe(200);
  return res.text();
}

function value(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return Number(line?.slice(series.length + 1) ?? NaN);
}

const requests = (verb: string, result: string): string => `codemode_kube_api_requests_total{verb="${verb}",result="${result}"}`;

describe('Kubernetes API requests on the real API server', () => {
  it('counts a 404 read, a 409 create and their successes by verb and result', async () => {
    const before = await scrape();
    const missing = await clients.core.readNamespacedConfigMap({ namespace: ns, name: 'absent' }).catch((e: unknown) => e);
    expect((missing as { code?: number }).code).toBe(404);
    const body = { metadata: { name: 'twice' }, data: { a: 'b' } };
    await clients.core.createNamespacedConfigMap({ namespace: ns, body });
    const again = await clients.core.createNamespacedConfigMap({ namespace: ns, body }).catch((e: unknown) => e);
    expect((again as { code?: number }).code).toBe(409);
    await clients.core.readNamespacedConfigMap({ namespace: ns, name: 'twice' });

    const after = await scrape();
    const delta = (verb: string, result: string): number => value(after, requests(verb, result)) - value(before, requests(verb, result));
    expect(delta('GET', 'not_found')).toBeGreaterThanOrEqual(1);
    expect(delta('GET', 'success')).toBeGreaterThanOrEqual(1);
    expect(delta('POST', 'success')).toBeGreaterThanOrEqual(1);
    expect(delta('POST', 'conflict')).toBeGreaterThanOrEqual(1);
    expect(after).not.toContain(ns);
    expect(after).not.toContain('twice');
  });

  it('counts an exec the API server refuses (no such pod) as CONNECT not_found', async () => {
    const before = value(await scrape(), requests('CONNECT', 'not_found'));
    await expect(clients.exec.exec(ns, 'no-such-pod', 'main', ['true'], null, null, null, false)).rejects.toBeDefined();
    expect(value(await scrape(), requests('CONNECT', 'not_found'))).toBeGreaterThan(before);
  });

  it('counts an informer that stopped on an error and restarts', async () => {
    // A resource the API server does not serve: the informer's list fails with 404, it restarts.
    const restarts = 'codemode_kube_informer_restarts_total{resource="other"}';
    const before = value(await scrape(), restarts);
    const informer = new ResilientInformer<KubernetesObject>(
      clients.kc,
      `/apis/codemode.dev/v1alpha1/namespaces/${ns}/nosuchthings`,
      (cont) =>
        clients.custom.listNamespacedCustomObject({
          group: 'codemode.dev',
          version: 'v1alpha1',
          namespace: ns,
          plural: 'nosuchthings',
          ...(cont && { _continue: cont }),
        }) as Promise<KubernetesListObject<KubernetesObject>>,
      pino({ level: 'silent' }),
    );
    try {
      await informer.start().catch(() => undefined);
      await until(async () => value(await scrape(), restarts) > (Number.isNaN(before) ? 0 : before), 30_000, 'an informer restart counted');
    } finally {
      await informer.stop();
    }
    expect(value(await scrape(), requests('GET', 'not_found'))).toBeGreaterThanOrEqual(1);
  });
});
