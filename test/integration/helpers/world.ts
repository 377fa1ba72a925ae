// A "world" for reconcile tests: real API objects in a fresh namespace of the real API server —
// SandboxRuns and SandboxSessions (status through the status subresource, as controllers write it),
// pods as markers that can never run (a scheduling gate keeps them unscheduled, and the API server
// sets their only status at creation — or the row, once, through the status subresource — so
// nothing changes them behind the test's back), Leases and ConfigMaps.
// The snapshot reads the whole namespace back and normalises away what the server invents
// (resourceVersion, uid, timestamps, managedFields, generated pod names), so a row states the
// world it expects.
import { PatchStrategy, V1MicroTime, setHeaderOptions, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import {
  API_VERSION,
  GROUP,
  SANDBOXRUN_KIND,
  SANDBOXRUN_PLURAL,
  SANDBOXSESSION_KIND,
  SANDBOXSESSION_PLURAL,
  VERSION,
} from '../../../src/api/v1alpha1/index.js';
import { ANNOTATION_CLAIMED_AT, LABEL_MANAGED_BY, LABEL_RUN, LABEL_SESSION, MANAGED_BY_VALUE } from '../../../src/api/v1alpha1/labels.js';
import type { KubeClients } from '../../../src/kube/clients.js';
import { runLabelValue } from '../../../src/sandbox/names.js';

/** What a row starts from. Times are ISO strings the row computes from its clock. */
export interface WorldSpec {
  runs?: Array<{ name: string; spec: Record<string, unknown>; annotations?: Record<string, string>; status?: Record<string, unknown> }>;
  sessions?: Array<{ name: string; spec?: Record<string, unknown>; status?: Record<string, unknown> }>;
  /**
   * Marker pods, owned (controller: true) by a run or a session of this world or by nothing (an
   * unclaimed pool pod); `labels` are added to the operator's, `annotations` set, `mounts` names a
   * ConfigMap volume.
   */
  pods?: MarkerSpec[];
  /** Create the pods a second apart, so their creationTimestamps (whole seconds) order them. */
  podsSecondsApart?: boolean;
  leases?: Array<{ name: string; holder: string; renewTime: string; durationSeconds: number }>;
  configMaps?: Array<{
    name: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    data?: Record<string, string>;
    immutable?: boolean;
  }>;
}

export interface MarkerSpec {
  name: string;
  owner?: { kind: typeof SANDBOXRUN_KIND | typeof SANDBOXSESSION_KIND; name: string };
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  mounts?: string;
  /**
   * Written through the status subresource after creation (nothing else writes a marker's
   * status): Failed, or Ready (Running with a Ready condition, as a started pool pod shows).
   */
  phase?: 'Failed' | 'Ready';
}

/** The scheduling gate that keeps marker pods from ever being scheduled. */
export const MARKER_GATE = 'codemode.dev/integration-marker';

const runApi = { group: GROUP, version: VERSION, plural: SANDBOXRUN_PLURAL };
const sessionApi = { group: GROUP, version: VERSION, plural: SANDBOXSESSION_PLURAL };

/** Creates the world's objects; returns the uid of each run and session by name. */
export async function buildWorld(c: KubeClients, namespace: string, w: WorldSpec): Promise<Map<string, string>> {
  const uids = new Map<string, string>();
  for (const r of w.runs ?? []) {
    const body = {
      apiVersion: API_VERSION,
      kind: SANDBOXRUN_KIND,
      metadata: { name: r.name, ...(r.annotations && { annotations: r.annotations }) },
      spec: r.spec,
    };
    const created = (await c.custom.createNamespacedCustomObject({ ...runApi, namespace, body })) as KubernetesObject;
    uids.set(`${SANDBOXRUN_KIND}/${r.name}`, created.metadata?.uid ?? '');
    if (r.status) await patchStatus(c, runApi, namespace, r.name, r.status);
  }
  for (const s of w.sessions ?? []) {
    const body = { apiVersion: API_VERSION, kind: SANDBOXSESSION_KIND, metadata: { name: s.name }, spec: s.spec ?? {} };
    const created = (await c.custom.createNamespacedCustomObject({ ...sessionApi, namespace, body })) as KubernetesObject;
    uids.set(`${SANDBOXSESSION_KIND}/${s.name}`, created.metadata?.uid ?? '');
    if (s.status) await patchStatus(c, sessionApi, namespace, s.name, s.status);
  }
  for (const cm of w.configMaps ?? []) {
    const body = { metadata: { name: cm.name, labels: cm.labels, annotations: cm.annotations }, data: cm.data ?? {}, ...(cm.immutable && { immutable: true }) };
    await c.core.createNamespacedConfigMap({ namespace, body });
  }
  for (const [i, p] of (w.pods ?? []).entries()) {
    if (w.podsSecondsApart && i > 0) await new Promise((r) => setTimeout(r, 1100));
    await c.core.createNamespacedPod({ namespace, body: markerPod(p, uids) });
    if (p.phase) await setMarkerPhase(c, namespace, p.name, p.phase);
  }
  for (const l of w.leases ?? []) {
    await c.coordination.createNamespacedLease({
      namespace,
      body: {
        metadata: { name: l.name },
        spec: { holderIdentity: l.holder, leaseDurationSeconds: l.durationSeconds, renewTime: new V1MicroTime(Date.parse(l.renewTime)) },
      },
    });
  }
  return uids;
}

/** A marker pod's status, written as MarkerSpec.phase says (nothing else writes it): Failed, or Ready. */
export async function setMarkerPhase(c: KubeClients, namespace: string, name: string, phase: NonNullable<MarkerSpec['phase']>): Promise<void> {
  const ready = { phase: 'Running', conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date() }] };
  const status = phase === 'Ready' ? ready : { phase };
  await c.core.patchNamespacedPodStatus({ namespace, name, body: { status } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
}

async function patchStatus(c: KubeClients, api: typeof runApi, namespace: string, name: string, status: Record<string, unknown>): Promise<void> {
  await c.custom.patchNamespacedCustomObjectStatus({ ...api, namespace, name, body: { status } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
}

export function markerPod(p: MarkerSpec, uids: Map<string, string>): V1Pod {
  const owner = p.owner;
  const uid = owner ? uids.get(`${owner.kind}/${owner.name}`) : '';
  if (owner && !uid) throw new Error(`marker pod ${p.name}: no ${owner.kind} ${owner.name} in this world`);
  const ownerLabel = owner && { [owner.kind === SANDBOXRUN_KIND ? LABEL_RUN : LABEL_SESSION]: runLabelValue(owner.name) };
  return {
    metadata: {
      name: p.name,
      labels: { [LABEL_MANAGED_BY]: MANAGED_BY_VALUE, ...ownerLabel, ...p.labels },
      ...(p.annotations && { annotations: p.annotations }),
      ...(owner &&
        uid && { ownerReferences: [{ apiVersion: API_VERSION, kind: owner.kind, name: owner.name, uid, controller: true, blockOwnerDeletion: true }] }),
    },
    spec: {
      schedulingGates: [{ name: MARKER_GATE }],
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 0,
      containers: [{ name: 'marker', image: 'codemode.local/sandbox:v1', imagePullPolicy: 'Never' }],
      ...(p.mounts && { volumes: [{ name: 'runtime', configMap: { name: p.mounts } }] }),
    },
  };
}

/** The namespace's objects as a row compares them (see normalise). Keyed `Kind/name`. */
export type World = Record<string, unknown>;

/** Reads every object of the namespace the controllers could touch. */
export async function snapshot(c: KubeClients, namespace: string): Promise<World> {
  const world: World = {};
  const runs = (await c.custom.listNamespacedCustomObject({ ...runApi, namespace })) as { items: KubernetesObject[] };
  for (const o of runs.items) world[`${SANDBOXRUN_KIND}/${o.metadata?.name}`] = normaliseCustom(o);
  const sessions = (await c.custom.listNamespacedCustomObject({ ...sessionApi, namespace })) as { items: KubernetesObject[] };
  for (const o of sessions.items) world[`${SANDBOXSESSION_KIND}/${o.metadata?.name}`] = normaliseCustom(o);
  // Pods named by the server (generateName) are keyed by that prefix and a number, in the order of
  // their normalised form: a row cannot know the names, only how many and what they look like.
  const generated: Array<{ prefix: string; pod: unknown }> = [];
  for (const p of (await c.core.listNamespacedPod({ namespace })).items) {
    const deadline = p.spec?.activeDeadlineSeconds;
    const pod = {
      metadata: meta(p),
      phase: p.status?.phase,
      gated: (p.spec?.schedulingGates ?? []).map((g) => g.name),
      ...(deadline !== undefined && { deadline }),
    };
    const prefix = p.metadata?.generateName;
    if (prefix) generated.push({ prefix, pod });
    else world[`Pod/${p.metadata?.name}`] = pod;
  }
  generated.sort((a, b) => (a.prefix + JSON.stringify(a.pod)).localeCompare(b.prefix + JSON.stringify(b.pod)));
  const counts = new Map<string, number>();
  for (const { prefix, pod } of generated) {
    const n = (counts.get(prefix) ?? 0) + 1;
    counts.set(prefix, n);
    world[`Pod/${prefix}#${n}`] = pod;
  }
  for (const l of (await c.coordination.listNamespacedLease({ namespace })).items) {
    world[`Lease/${l.metadata?.name}`] = { holder: l.spec?.holderIdentity };
  }
  for (const cm of (await c.core.listNamespacedConfigMap({ namespace })).items) {
    if (cm.metadata?.name !== 'kube-root-ca.crt') world[`ConfigMap/${cm.metadata?.name}`] = { metadata: meta(cm) };
  }
  for (const np of (await c.networking.listNamespacedNetworkPolicy({ namespace })).items) world[`NetworkPolicy/${np.metadata?.name}`] = { metadata: meta(np) };
  // Events have random names: one sorted list of what they say, from the operator only.
  const events = (await c.events.listNamespacedEvent({ namespace })).items
    .filter((e) => e.reportingController === 'codemode.dev/operator')
    .map((e) => ({ type: e.type, reason: e.reason, action: e.action, note: e.note, regarding: `${e.regarding?.kind}/${e.regarding?.name}` }))
    .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
  if (events.length > 0) world.Events = events;
  return world;
}

/** Every object's resourceVersion: two snapshots with equal versions saw no write at all. */
export async function versions(c: KubeClients, namespace: string): Promise<Record<string, string | undefined>> {
  const out: Record<string, string | undefined> = {};
  const add = (kind: string, items: KubernetesObject[]): void => {
    for (const o of items) out[`${kind}/${o.metadata?.name}`] = o.metadata?.resourceVersion;
  };
  add(SANDBOXRUN_KIND, ((await c.custom.listNamespacedCustomObject({ ...runApi, namespace })) as { items: KubernetesObject[] }).items);
  add(SANDBOXSESSION_KIND, ((await c.custom.listNamespacedCustomObject({ ...sessionApi, namespace })) as { items: KubernetesObject[] }).items);
  add('Pod', (await c.core.listNamespacedPod({ namespace })).items);
  add('Lease', (await c.coordination.listNamespacedLease({ namespace })).items);
  // kube-root-ca.crt is the controller-manager's, published whenever it gets to the new namespace.
  add(
    'ConfigMap',
    (await c.core.listNamespacedConfigMap({ namespace })).items.filter((cm) => cm.metadata?.name !== 'kube-root-ca.crt'),
  );
  add('NetworkPolicy', (await c.networking.listNamespacedNetworkPolicy({ namespace })).items);
  add('Event', (await c.events.listNamespacedEvent({ namespace })).items);
  return out;
}

/** Stands for any RFC 3339 time in a normalised world. */
export const TIME = '<time>';
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;

function normaliseCustom(o: KubernetesObject): unknown {
  const { spec, status } = o as { spec?: unknown; status?: unknown };
  return { metadata: meta(o), spec, ...(status !== undefined && { status: times(status) }) };
}

function meta(o: KubernetesObject): Record<string, unknown> {
  const m = o.metadata ?? {};
  const owners = (m.ownerReferences ?? []).map((r) => `${r.kind}/${r.name}${r.controller ? ' (controller)' : ''}`);
  return {
    ...(m.labels && { labels: m.labels }),
    // A claim's time comes from a clock: the row asserts that it is there.
    ...(m.annotations && { annotations: m.annotations[ANNOTATION_CLAIMED_AT] ? { ...m.annotations, [ANNOTATION_CLAIMED_AT]: TIME } : m.annotations }),
    ...(owners.length > 0 && { owners }),
    ...(m.finalizers && { finalizers: m.finalizers }),
    ...(m.deletionTimestamp && { deleting: true }),
  };
}

/** Replaces every RFC 3339 time with TIME (they come from clocks: the row asserts the rest). */
function times(v: unknown): unknown {
  if (typeof v === 'string') return ISO.test(v) ? TIME : v;
  if (Array.isArray(v)) return v.map(times);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, times(x)]));
  return v;
}
