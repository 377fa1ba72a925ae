// apiClass (src/kube/api-client.ts) must behave as client-node's own API clients: the same
// parameters in the same order for every method of the groups the gateway uses, and the same
// requests, middleware order and errors as ObjectCoreV1Api for the same calls.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import {
  CoreV1Api,
  type RequestContext,
  ResponseContext,
  ServerConfiguration,
  createConfiguration,
  setHeaderOptions,
  PatchStrategy,
  type CoreV1Api as CoreV1ApiType,
} from '@kubernetes/client-node';
import * as Apis from '@kubernetes/client-node/dist/gen/apis/CoreV1Api.js';
import { CoordinationV1ApiRequestFactory } from '@kubernetes/client-node/dist/gen/apis/CoordinationV1Api.js';
import { CustomObjectsApiRequestFactory } from '@kubernetes/client-node/dist/gen/apis/CustomObjectsApi.js';
import { EventsV1ApiRequestFactory } from '@kubernetes/client-node/dist/gen/apis/EventsV1Api.js';
import { NetworkingV1ApiRequestFactory } from '@kubernetes/client-node/dist/gen/apis/NetworkingV1Api.js';
import { AuthenticationV1ApiRequestFactory } from '@kubernetes/client-node/dist/gen/apis/AuthenticationV1Api.js';
import { from, of } from '@kubernetes/client-node/dist/gen/rxjsStub.js';
import { describe, expect, it } from 'vitest';
import { apiClass, isQuotaConflict, parameterNames, throttledRetryMs } from '../../../src/kube/api-client.js';

const dist = dirname(createRequire(import.meta.url).resolve('@kubernetes/client-node/dist/config.js'));

describe('parameterNames', () => {
  // Functions built from text: their parameters are what the test is about, and they are unused.
  it.each([
    [
      ['namespace', 'body', '_options'],
      ['namespace', 'body'],
    ],
    [['_options'], []],
    [[], []],
    [
      ['name', 'namespace', 'body', 'dryRun', '_options'],
      ['name', 'namespace', 'body', 'dryRun'],
    ],
  ])('%j', (params, names) => {
    expect(parameterNames(new Function(...params, 'return 1;') as () => unknown)).toEqual(names);
  });
});

/** For each method of client-node's ObjectParamAPI class `Object<group>`: the param fields it passes, in order. */
function objectParamCalls(group: string): Map<string, string[]> {
  const src = readFileSync(join(dist, 'gen/types/ObjectParamAPI.js'), 'utf8');
  const start = src.indexOf(`export class Object${group} {`);
  const end = src.indexOf('export class ', start + 1);
  const body = src.slice(start, end < 0 ? undefined : end);
  const calls = new Map<string, string[]>();
  for (const m of body.matchAll(/\n {4}(\w+)\(param(?:\s*=\s*\{\})?, options\) \{\n\s+return this\.api\.(\w+)\(([^)]*)\)\.toPromise\(\);/g)) {
    const [, name, target, args] = m;
    if (name !== target) continue;
    calls.set(
      name ?? '',
      (args ?? '')
        .split(',')
        .map((a) => a.trim())
        .filter((a) => a !== 'options')
        .map((a) => a.replace(/^param\./, '')),
    );
  }
  return calls;
}

describe('apiClass parameters match client-node', () => {
  it.each([
    ['CoreV1Api', Apis.CoreV1ApiRequestFactory],
    ['CustomObjectsApi', CustomObjectsApiRequestFactory],
    ['NetworkingV1Api', NetworkingV1ApiRequestFactory],
    ['EventsV1Api', EventsV1ApiRequestFactory],
    ['CoordinationV1Api', CoordinationV1ApiRequestFactory],
    ['AuthenticationV1Api', AuthenticationV1ApiRequestFactory],
  ])('%s', (group, Factory) => {
    const calls = objectParamCalls(group);
    expect(calls.size).toBeGreaterThan(3);
    for (const [method, params] of calls) {
      // The …WithHttpInfo variants take the same parameters as their namesake.
      const fn = (Factory.prototype as unknown as Record<string, (...a: unknown[]) => unknown>)[method.replace(/WithHttpInfo$/, '')];
      expect(fn, method).toBeTypeOf('function');
      expect(parameterNames(fn as (...a: unknown[]) => unknown), method).toEqual(params);
    }
  });
});

/** What a fake HTTP library answers: `status` with `body` as JSON. */
function jsonResponse(status: number, body: unknown, headers: Record<string, string> = {}): ReturnType<typeof from<ResponseContext>> {
  const text = JSON.stringify(body);
  return from(
    Promise.resolve(
      new ResponseContext(status, { 'content-type': 'application/json', ...headers }, {
        text: async () => text,
        binary: async () => Buffer.from(text),
      } as unknown as ConstructorParameters<typeof ResponseContext>[2]),
    ),
  );
}

interface Sent {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: unknown;
}

/** A configuration whose HTTP library records each request and answers `status` with `body`. */
function recording(status: number, body: unknown): { config: ReturnType<typeof createConfiguration>; sent: Sent[]; order: string[] } {
  const sent: Sent[] = [];
  const order: string[] = [];
  const mw = (tag: string) => ({
    pre: (ctx: RequestContext) => (order.push(`pre ${tag}`), of(ctx)),
    post: (rsp: ResponseContext) => (order.push(`post ${tag}`), of(rsp)),
  });
  const config = createConfiguration({
    baseServer: new ServerConfiguration('https://k8s.example:6443', {}),
    middleware: [mw('a'), mw('b')],
    httpApi: {
      send: (ctx: RequestContext) => {
        sent.push({ url: ctx.getUrl(), method: ctx.getHttpMethod(), headers: ctx.getHeaders(), body: ctx.getBody() });
        return jsonResponse(status, body);
      },
    },
  });
  return { config, sent, order };
}

async function both(status: number, body: unknown, act: (api: CoreV1ApiType) => Promise<unknown>) {
  const run = async (api: CoreV1ApiType, rec: ReturnType<typeof recording>) => {
    const result = await act(api).then(
      (v) => ({ ok: true, v }),
      (e: unknown) => ({ ok: false, code: (e as { code?: unknown }).code, message: (e as Error).message }),
    );
    return { result: JSON.parse(JSON.stringify(result)) as unknown, sent: rec.sent, order: rec.order };
  };
  const a = recording(status, body);
  const b = recording(status, body);
  const Slim = apiClass<CoreV1ApiType>(Apis.CoreV1ApiRequestFactory, Apis.CoreV1ApiResponseProcessor);
  return { ours: await run(new Slim(a.config), a), theirs: await run(new CoreV1Api(b.config), b) };
}

const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p', namespace: 'n', labels: { a: 'b' } }, spec: { containers: [{ name: 'c', image: 'i' }] } };

describe('apiClass calls like client-node', () => {
  it.each<[string, number, unknown, (api: CoreV1ApiType) => Promise<unknown>]>([
    ['read', 200, pod, (api) => api.readNamespacedPod({ name: 'p', namespace: 'n' })],
    ['create', 201, pod, (api) => api.createNamespacedPod({ namespace: 'n', body: pod, fieldManager: 'fm' })],
    [
      'list with a selector',
      200,
      { items: [pod], metadata: { continue: 'x' } },
      (api) => api.listNamespacedPod({ namespace: 'n', labelSelector: 'a=b', limit: 5 }),
    ],
    [
      'merge patch with header options',
      200,
      pod,
      (api) =>
        api.patchNamespacedPod(
          { name: 'p', namespace: 'n', body: { metadata: { labels: { a: 'c' } } } },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        ),
    ],
    ['delete', 200, pod, (api) => api.deleteNamespacedPod({ name: 'p', namespace: 'n', gracePeriodSeconds: 0 })],
    ['a 404', 404, { kind: 'Status', code: 404, reason: 'NotFound' }, (api) => api.readNamespacedPod({ name: 'p', namespace: 'n' })],
    ['a 409', 409, { kind: 'Status', code: 409, reason: 'Conflict' }, (api) => api.createNamespacedPod({ namespace: 'n', body: pod })],
    [
      'with HTTP info',
      200,
      pod,
      (api) => api.readNamespacedPodWithHttpInfo({ name: 'p', namespace: 'n' }).then((i) => ({ status: i.httpStatusCode, data: i.data })),
    ],
    ['a missing required parameter', 200, pod, (api) => api.readNamespacedPod({ name: 'p' } as { name: string; namespace: string })],
  ])('%s', async (_name, status, body, act) => {
    const { ours, theirs } = await both(status, body, act);
    expect(ours).toEqual(theirs);
  });

  it('sees what it compares (a request was sent and middleware ran)', async () => {
    const { ours } = await both(200, pod, (api) => api.readNamespacedPod({ name: 'p', namespace: 'n' }));
    expect(ours.sent).toHaveLength(1);
    expect(ours.sent[0]?.url).toBe('https://k8s.example:6443/api/v1/namespaces/n/pods/p');
    expect(ours.order).toEqual(['pre a', 'pre b', 'post b', 'post a']);
  });
});

const QUOTA_CONFLICT = {
  kind: 'Status',
  status: 'Failure',
  message: 'Operation cannot be fulfilled on resourcequotas "q": the object has been modified; please apply your changes to the latest version and try again',
  reason: 'Conflict',
  details: { name: 'q', kind: 'resourcequotas' },
  code: 409,
};
const ALREADY_EXISTS = { kind: 'Status', reason: 'AlreadyExists', details: { name: 'p', kind: 'pods' }, code: 409 };

describe('isQuotaConflict', () => {
  it.each([
    ['a quota conflict (body as text)', { code: 409, body: JSON.stringify(QUOTA_CONFLICT) }, true],
    ['a quota conflict (body parsed)', { code: 409, body: QUOTA_CONFLICT }, true],
    ['the object exists already', { code: 409, body: JSON.stringify(ALREADY_EXISTS) }, false],
    ['a resourceVersion conflict on the object', { code: 409, body: JSON.stringify({ ...QUOTA_CONFLICT, details: { kind: 'pods' } }) }, false],
    ['quota exceeded (403)', { code: 403, body: JSON.stringify({ ...QUOTA_CONFLICT, code: 403 }) }, false],
    ['no status at all', new Error('ECONNRESET'), false],
    ['null', null, false],
  ])('%s', (_name, err, expected) => {
    expect(isQuotaConflict(err)).toBe(expected);
  });
});

/** A client whose requests are answered in turn with `answers` (status, body, headers; the last repeats); records what was sent. */
function scripted(answers: Array<[number, unknown, Record<string, string>?]>): { api: CoreV1ApiType; sent: string[] } {
  const sent: string[] = [];
  const config = createConfiguration({
    baseServer: new ServerConfiguration('https://k8s.example:6443', {}),
    httpApi: {
      send: (ctx: RequestContext) => {
        sent.push(`${ctx.getHttpMethod()} ${ctx.getUrl()}`);
        const [status, body, headers] = answers[Math.min(sent.length - 1, answers.length - 1)] as [number, unknown, Record<string, string>?];
        return jsonResponse(status, body, headers);
      },
    },
  });
  const Slim = apiClass<CoreV1ApiType>(Apis.CoreV1ApiRequestFactory, Apis.CoreV1ApiResponseProcessor);
  return { api: new Slim(config), sent };
}

describe('creates refused by a quota conflict are sent again', () => {
  it('a create that meets two quota conflicts succeeds on the third request', async () => {
    const { api, sent } = scripted([
      [409, QUOTA_CONFLICT],
      [409, QUOTA_CONFLICT],
      [201, pod],
    ]);
    await expect(api.createNamespacedPod({ namespace: 'n', body: pod })).resolves.toMatchObject({ metadata: { name: 'p' } });
    expect(sent).toEqual(Array(3).fill('POST https://k8s.example:6443/api/v1/namespaces/n/pods'));
  });

  it('gives up after its retries with the quota conflict itself', async () => {
    const { api, sent } = scripted([[409, QUOTA_CONFLICT]]);
    await expect(api.createNamespacedPod({ namespace: 'n', body: pod })).rejects.toMatchObject({ code: 409 });
    expect(sent).toHaveLength(6);
  });

  it.each<[string, (api: CoreV1ApiType) => Promise<unknown>, [number, unknown]]>([
    ['a create whose object exists', (api) => api.createNamespacedPod({ namespace: 'n', body: pod }), [409, ALREADY_EXISTS]],
    ['a patch (not a create) meeting a quota conflict', (api) => api.patchNamespacedPod({ name: 'p', namespace: 'n', body: {} }), [409, QUOTA_CONFLICT]],
  ])('%s is sent once', async (_name, act, answer) => {
    const { api, sent } = scripted([answer]);
    await expect(act(api)).rejects.toMatchObject({ code: 409 });
    expect(sent).toHaveLength(1);
  });
});

const STORAGE_STARTING = {
  kind: 'Status',
  status: 'Failure',
  message: 'storage is (re)initializing',
  reason: 'TooManyRequests',
  details: { retryAfterSeconds: 1 },
  code: 429,
};

describe('throttledRetryMs: a 429 is sent again after its Retry-After, bounded', () => {
  it.each<[string, unknown, number | undefined]>([
    ['Retry-After 1', { code: 429, headers: { 'retry-after': '1' } }, 1000],
    ['Retry-After 0', { code: 429, headers: { 'retry-after': '0' } }, 0],
    ['Retry-After 0.5', { code: 429, headers: { 'retry-after': '0.5' } }, 500],
    ['Retry-After 120: capped', { code: 429, headers: { 'retry-after': '120' } }, 2000],
    ['no Retry-After', { code: 429, headers: {} }, 1000],
    ['no headers at all', { code: 429 }, 1000],
    ['an HTTP date', { code: 429, headers: { 'retry-after': 'Wed, 21 Oct 2026 07:28:00 GMT' } }, 1000],
    ['a negative one', { code: 429, headers: { 'retry-after': '-3' } }, 1000],
    ['an empty one', { code: 429, headers: { 'retry-after': '' } }, 1000],
    ['a 503 with Retry-After (it may have been processed)', { code: 503, headers: { 'retry-after': '1' } }, undefined],
    ['a 409', { code: 409 }, undefined],
    ['not an API error', new Error('socket hang up'), undefined],
    ['null', null, undefined],
  ])('%s', (_name, err, ms) => {
    expect(throttledRetryMs(err)).toBe(ms);
  });
});

describe('requests answered 429 are sent again', () => {
  const list = { kind: 'PodList', apiVersion: 'v1', metadata: {}, items: [pod] };

  it('a list that meets "storage is (re)initializing" twice succeeds on the third request', async () => {
    const { api, sent } = scripted([
      [429, STORAGE_STARTING, { 'retry-after': '0' }],
      [429, STORAGE_STARTING, { 'retry-after': '0' }],
      [200, list],
    ]);
    await expect(api.listNamespacedPod({ namespace: 'n' })).resolves.toMatchObject({ items: [{ metadata: { name: 'p' } }] });
    expect(sent).toEqual(Array(3).fill('GET https://k8s.example:6443/api/v1/namespaces/n/pods'));
  });

  it('a create is sent again too (a 429 was not processed)', async () => {
    const { api, sent } = scripted([
      [429, STORAGE_STARTING, { 'retry-after': '0' }],
      [201, pod],
    ]);
    await expect(api.createNamespacedPod({ namespace: 'n', body: pod })).resolves.toMatchObject({ metadata: { name: 'p' } });
    expect(sent).toHaveLength(2);
  });

  it('gives up after three more tries with the 429 itself', async () => {
    const { api, sent } = scripted([[429, STORAGE_STARTING, { 'retry-after': '0' }]]);
    await expect(api.listNamespacedPod({ namespace: 'n' })).rejects.toMatchObject({ code: 429 });
    expect(sent).toHaveLength(4);
  });

  it('waits the Retry-After the server asked for', async () => {
    const { api, sent } = scripted([
      [429, STORAGE_STARTING, { 'retry-after': '0.3' }],
      [200, list],
    ]);
    const t0 = performance.now();
    await api.listNamespacedPod({ namespace: 'n' });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(290);
    expect(sent).toHaveLength(2);
  });
});

describe('apiClass instances', () => {
  it('use a method set on the instance, as client-node classes do (wrappers that time or count calls)', async () => {
    const Slim = apiClass<CoreV1ApiType>(Apis.CoreV1ApiRequestFactory, Apis.CoreV1ApiResponseProcessor);
    const rec = recording(200, pod);
    const api = new Slim(rec.config);
    const original = api.readNamespacedPod.bind(api);
    let wrapped = 0;
    api.readNamespacedPod = (...args: Parameters<CoreV1ApiType['readNamespacedPod']>) => (wrapped++, original(...args));
    await api.readNamespacedPod({ name: 'p', namespace: 'n' });
    expect(wrapped).toBe(1);
    expect(rec.sent).toHaveLength(1);
  });
});
