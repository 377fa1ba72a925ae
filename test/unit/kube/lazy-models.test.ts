// client-node's ObjectSerializer with lazily loaded models (src/kube/lazy-models.ts, used by the
// resolve hook in src/kube/slim-load.ts): the rewrite applies to the installed client-node and
// covers every model it has, nothing imports the re-exports it drops, and the rewritten module
// (de)serializes the objects the gateway sends and receives exactly as the original does, to the
// same classes.
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ObjectSerializer } from '@kubernetes/client-node/dist/gen/models/ObjectSerializer.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isObjectSerializerModule, lazyModelsSource } from '../../../src/kube/lazy-models.js';

const models = join(dirname(createRequire(import.meta.url).resolve('@kubernetes/client-node/dist/config.js')), 'gen/models');
const serializerFile = join(models, 'ObjectSerializer.js');
const original = readFileSync(serializerFile, 'utf8');
const serializerUrl = pathToFileURL(serializerFile).href;
type Serializer = typeof ObjectSerializer;

describe('lazyModelsSource on the installed client-node', () => {
  const lazy = lazyModelsSource(original, serializerUrl);
  const allModels = [...readFileSync(join(models, 'all.js'), 'utf8').matchAll(/^export \* from '(?:\.\.\/models|\.)\/(\w+)\.js';$/gm)].map((m) => m[1]);

  it('applies, with an entry for every model client-node has', () => {
    expect(lazy).toBeDefined();
    expect(allModels.length).toBeGreaterThan(700);
    expect([...(lazy?.models.keys() ?? [])].sort()).toEqual([...allModels].sort());
    expect(lazy?.reexports).toBe(allModels.length);
    expect(lazy?.source).not.toMatch(/^import \{ \w+ \} from '\.\.\/models\//m);
  });

  it('drops only re-exports nobody imports: every importer takes just ObjectSerializer', () => {
    const dist = join(models, '../..');
    const importers = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? importers(join(dir, e.name)) : e.name.endsWith('.js') ? [readFileSync(join(dir, e.name), 'utf8')] : [],
      );
    const imports = importers(dist).flatMap((src) =>
      [...src.matchAll(/import\s*\{([^}]*)\}\s*from\s*'[^']*\/ObjectSerializer\.js'/g)].map((m) => m[1]?.trim()),
    );
    expect(imports.length).toBeGreaterThan(0);
    for (const names of imports) expect(names).toMatch(/^ObjectSerializer(\s+as\s+\w+)?$/);
  });
});

describe('lazyModelsSource on other shapes', () => {
  const head = "import { V1Pod } from '../models/V1Pod.js';\nexport * from '../models/V1Pod.js';\nlet primitives = [];";
  it.each<[string, string]>([
    ['no typeMap', head],
    ['a typeMap entry without an import', `${head}\nlet typeMap = {\n    "V1Pod": V1Pod,\n    "V1Foo": V1Foo,\n};\n`],
    ['an import without a typeMap entry', `import { V1Foo } from '../models/V1Foo.js';\n${head}\nlet typeMap = {\n    "V1Pod": V1Pod,\n};\n`],
    ['a model used elsewhere', `${head}\nlet typeMap = {\n    "V1Pod": V1Pod,\n};\nconst x = new V1Pod();\n`],
    ['an unclosed typeMap', `${head}\nlet typeMap = {\n    "V1Pod": V1Pod,\n`],
    ['no model imports', 'let typeMap = {\n};\n'],
  ])('%s: undefined (the original is kept)', (_name, source) => {
    expect(lazyModelsSource(source, serializerUrl)).toBeUndefined();
  });

  it.each<[string, boolean]>([
    [serializerUrl, true],
    ['file:///app/node_modules/@kubernetes/client-node/dist/gen/models/ObjectSerializer.js', true],
    ['file:///app/node_modules/@kubernetes/client-node/dist/serializer.js', false],
    ['file:///app/node_modules/@kubernetes/client-node/dist/gen/models/V1Pod.js', false],
    ['node:module', false],
  ])('isObjectSerializerModule(%s): %s', (url, expected) => {
    expect(isObjectSerializerModule(url)).toBe(expected);
  });
});

const time = '2026-11-24T10:00:00Z';
const micro = '2026-11-24T10:00:00.123456Z';
const meta = { name: 'x', namespace: 'ns', uid: 'u1', resourceVersion: '7', creationTimestamp: time, labels: { a: 'b' }, annotations: { c: 'd' } };
const container = {
  name: 'main',
  image: 'img:1',
  command: ['sh', '-c', 'true'],
  env: [
    { name: 'A', value: '1' },
    { name: 'B', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
  ],
  resources: { requests: { cpu: '100m', memory: '64Mi' }, limits: { memory: '256Mi', 'ephemeral-storage': '1Gi' } },
  securityContext: {
    runAsNonRoot: true,
    runAsUser: 65532,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  },
  volumeMounts: [{ name: 'work', mountPath: '/work' }],
  stdin: true,
};
const pod = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: {
    ...meta,
    ownerReferences: [{ apiVersion: 'codemode.dev/v1alpha1', kind: 'SandboxRun', name: 'r', uid: 'u2', controller: true }],
    managedFields: [{ manager: 'm', operation: 'Apply', time, fieldsType: 'FieldsV1', fieldsV1: { 'f:spec': {} } }],
  },
  spec: {
    containers: [container],
    initContainers: [{ ...container, name: 'init' }],
    volumes: [
      { name: 'work', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } },
      { name: 'rt', configMap: { name: 'cm', defaultMode: 0o444 } },
    ],
    restartPolicy: 'Never',
    automountServiceAccountToken: false,
    enableServiceLinks: false,
    securityContext: { runAsNonRoot: true, fsGroup: 65532, seccompProfile: { type: 'RuntimeDefault' } },
    tolerations: [{ key: 'k', operator: 'Exists', effect: 'NoSchedule', tolerationSeconds: 5 }],
    affinity: {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'k', operator: 'In', values: ['v'] }] }] },
      },
    },
    runtimeClassName: 'gvisor',
    activeDeadlineSeconds: 60,
  },
  status: {
    phase: 'Running',
    podIP: '10.0.0.1',
    startTime: time,
    conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: time }],
    containerStatuses: [
      {
        name: 'main',
        ready: true,
        restartCount: 0,
        image: 'img:1',
        imageID: 'sha',
        started: true,
        state: { running: { startedAt: time } },
        lastState: { terminated: { exitCode: 137, reason: 'OOMKilled', startedAt: time, finishedAt: time } },
      },
    ],
  },
};

/** Objects the gateway's API calls send or receive, by the type name client-node passes. */
const OBJECTS: Array<[string, unknown]> = [
  ['V1Pod', pod],
  ['V1PodList', { apiVersion: 'v1', kind: 'PodList', metadata: { resourceVersion: '9', _continue: 'c' }, items: [pod, pod] }],
  [
    'V1Status',
    {
      apiVersion: 'v1',
      kind: 'Status',
      status: 'Failure',
      message: 'm',
      reason: 'AlreadyExists',
      code: 409,
      details: { name: 'x', kind: 'pods', causes: [{ field: 'f', message: 'm' }] },
    },
  ],
  [
    'V1Lease',
    {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: meta,
      spec: { holderIdentity: 'h', leaseDurationSeconds: 15, acquireTime: micro, renewTime: micro, leaseTransitions: 2 },
    },
  ],
  [
    'EventsV1Event',
    {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: meta,
      eventTime: micro,
      reason: 'R',
      note: 'n',
      type: 'Normal',
      action: 'A',
      reportingController: 'c',
      reportingInstance: 'i',
      regarding: { kind: 'Pod', name: 'x', namespace: 'ns', uid: 'u' },
    },
  ],
  [
    'V1NetworkPolicy',
    {
      apiVersion: 'networking.k8s.io/v1',
      kind: 'NetworkPolicy',
      metadata: meta,
      spec: {
        podSelector: { matchLabels: { a: 'b' } },
        policyTypes: ['Ingress', 'Egress'],
        egress: [{ to: [{ ipBlock: { cidr: '0.0.0.0/0', except: ['10.0.0.0/8'] } }], ports: [{ protocol: 'TCP', port: 443 }] }],
      },
    },
  ],
  ['V1Namespace', { apiVersion: 'v1', kind: 'Namespace', metadata: meta, spec: { finalizers: ['kubernetes'] }, status: { phase: 'Active' } }],
  ['V1ConfigMap', { apiVersion: 'v1', kind: 'ConfigMap', metadata: meta, data: { a: 'b' }, binaryData: { c: 'ZA==' } }],
  ['V1Secret', { apiVersion: 'v1', kind: 'Secret', metadata: meta, type: 'Opaque', data: { a: 'Yg==' } }],
  [
    'V1Deployment',
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: meta,
      spec: { replicas: 1, selector: { matchLabels: { a: 'b' } }, template: { metadata: { labels: { a: 'b' } }, spec: pod.spec } },
      status: { readyReplicas: 1, conditions: [{ type: 'Available', status: 'True', lastUpdateTime: time }] },
    },
  ],
  [
    'V1TokenReview',
    {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token: 't', audiences: ['a'] },
      status: { authenticated: true, user: { username: 'u', groups: ['g'] } },
    },
  ],
  ['V1DeleteOptions', { propagationPolicy: 'Background', gracePeriodSeconds: 0, preconditions: { uid: 'u' } }],
  ['any', { apiVersion: 'codemode.dev/v1alpha1', kind: 'SandboxRun', metadata: meta, spec: { code: 'x' } }],
];

describe('the rewritten ObjectSerializer against the original', () => {
  let dir = '';
  let Lazy: Serializer;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lazy-models-'));
    const file = join(dir, 'ObjectSerializer.mjs');
    writeFileSync(file, lazyModelsSource(original, serializerUrl)?.source ?? '');
    ({ ObjectSerializer: Lazy } = (await import(pathToFileURL(file).href)) as { ObjectSerializer: Serializer });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.each(OBJECTS)('%s: deserialize, then serialize, give the same objects and classes', (type, json) => {
    const theirs = ObjectSerializer.deserialize(structuredClone(json), type, '') as unknown;
    const ours = Lazy.deserialize(structuredClone(json), type, '') as unknown;
    expect(ours).toStrictEqual(theirs);
    expect(Lazy.serialize(ours, type, '')).toStrictEqual(ObjectSerializer.serialize(theirs, type, ''));
  });

  it('every model type deserializes to the same class as with the original', () => {
    const lazy = lazyModelsSource(original, serializerUrl);
    for (const type of lazy?.models.keys() ?? []) {
      const ours = Lazy.deserialize({}, type, '') as object;
      const theirs = ObjectSerializer.deserialize({}, type, '') as object;
      expect(ours.constructor, type).toBe(theirs.constructor);
      expect(ours.constructor.name, type).not.toBe('Object');
    }
  });
});
