import { describe, expect, it } from 'vitest';
import type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import { STRIPPED_ANNOTATION, parseCachedRun, stripRun } from '../../../src/controller/cached-run.js';
import { listAllPages } from '../../../src/kube/informer.js';
import { jsonSize } from '../../../src/api/v1alpha1/index.js';

const big = 'x'.repeat(200_000);

function storedRun(): KubernetesObject & Record<string, unknown> {
  const run = {
    apiVersion: 'codemode.dev/v1alpha1',
    kind: 'SandboxRun',
    metadata: {
      name: 'r1',
      namespace: 'ns',
      uid: 'u1',
      resourceVersion: '7',
      generation: 1,
      creationTimestamp: '2026-11-23T17:00:00Z',
      annotations: { 'codemode.dev/executor': 'gw-1', 'kubectl.kubernetes.io/last-applied-configuration': big },
      managedFields: [{ manager: 'kubectl', fieldsV1: { 'f:spec': {} } }],
    },
    spec: { language: 'python', code: big, stdin: big, timeoutSeconds: 30, ttlSecondsAfterFinished: 60 },
    status: {
      phase: 'Succeeded',
      stdout: big,
      stderr: big,
      message: big,
      conditions: [{ type: 'Complete', status: 'True', reason: 'Succeeded', message: big, lastTransitionTime: '2026-11-23T17:00:01Z' }],
      completionTime: '2026-11-23T17:00:01Z',
      exitCode: 0,
    },
  };
  return run as unknown as KubernetesObject & Record<string, unknown>;
}

describe('stripRun', () => {
  it('keeps what reconcile reads and drops code, stdin, outputs and copies of them', () => {
    const original = storedRun();
    const stripped = stripRun(original) as unknown as Record<string, Record<string, unknown>>;
    expect(stripped.spec).toEqual({ language: 'python', timeoutSeconds: 30, ttlSecondsAfterFinished: 60 });
    expect(stripped.status).toEqual({ phase: 'Succeeded', completionTime: '2026-11-23T17:00:01Z', exitCode: 0 });
    expect(stripped.metadata).toMatchObject({
      name: 'r1',
      namespace: 'ns',
      uid: 'u1',
      resourceVersion: '7',
      annotations: { 'codemode.dev/executor': 'gw-1', [STRIPPED_ANNOTATION]: 'true' },
    });
    expect(stripped.metadata).not.toHaveProperty('managedFields');
    expect(jsonSize(stripped)).toBeLessThan(1024);
    // Pure: the watch event's object is not changed.
    expect((original.spec as { code: string }).code).toBe(big);
  });

  it("keeps only the names and starts of an audit record's calls (the per-user rate limit's count)", () => {
    const call = {
      name: 'c2',
      startTime: '2026-11-23T17:00:00Z',
      completionTime: '2026-11-23T17:00:01Z',
      phase: 'Failed',
      reason: 'Exception',
      stdoutBytes: 1,
      stderrBytes: 2,
      codeBytes: 3,
      codeSha256: 'a'.repeat(64),
    };
    const r = storedRun();
    const stripped = stripRun({ ...r, status: { ...(r.status as object), calls: [call, null] } }) as unknown as { status: { calls: unknown[] } };
    expect(stripped.status.calls).toEqual([
      { name: 'c2', startTime: '2026-11-23T17:00:00Z' },
      { name: undefined, startTime: undefined },
    ]);
    expect(parseCachedRun(stripped).ok).toBe(true);
  });

  it.each([
    ['no status yet', { status: undefined }],
    ['no annotations', { metadata: { name: 'r1', namespace: 'ns' } }],
  ])('handles a run with %s', (_n, patch) => {
    const r = { ...storedRun(), ...patch };
    const parsed = parseCachedRun(stripRun(r));
    expect(parsed.ok).toBe(true);
  });

  it.each([
    ['a TTL above the API maximum', { ttlSecondsAfterFinished: 10 ** 9 }, 'spec.ttlSecondsAfterFinished must be at most 604800'],
    ['an unknown language', { language: 'cobol' }, 'spec.language must be one of'],
  ])('parseCachedRun still rejects %s', (_n, spec, message) => {
    const r = storedRun();
    const parsed = parseCachedRun(stripRun({ ...r, spec: { ...(r.spec as object), ...spec } }));
    expect(parsed).toMatchObject({ ok: false, message: expect.stringContaining(message) });
  });
});

describe('listAllPages', () => {
  const page = (names: string[], cont: string | undefined, rv: string): KubernetesListObject<KubernetesObject> => ({
    apiVersion: 'v1',
    kind: 'List',
    metadata: { resourceVersion: rv, ...(cont && { _continue: cont }) },
    items: names.map((name) => ({ metadata: { name, resourceVersion: rv } })),
  });

  it('follows continue tokens, transforms each item and keeps the snapshot resourceVersion', async () => {
    const calls: Array<string | undefined> = [];
    const pages: Record<string, KubernetesListObject<KubernetesObject>> = {
      first: page(['a', 'b'], 't1', '10'),
      t1: page(['c'], 't2', '10'),
      t2: page(['d'], undefined, '10'),
    };
    const list = await listAllPages(
      async (cont) => {
        calls.push(cont);
        return pages[cont ?? 'first']!;
      },
      (o) => ({ ...o, metadata: { ...o.metadata, labels: { seen: 'yes' } } }),
    );
    expect(calls).toEqual([undefined, 't1', 't2']);
    expect(list.items.map((i) => i.metadata?.name)).toEqual(['a', 'b', 'c', 'd']);
    expect(list.items.every((i) => i.metadata?.labels?.seen === 'yes')).toBe(true);
    expect(list.metadata?.resourceVersion).toBe('10');
  });

  it('follows the plain-JSON spelling of custom object lists (metadata.continue)', async () => {
    const plain = (names: string[], cont?: string) => ({ ...page(names, undefined, '5'), metadata: { resourceVersion: '5', ...(cont && { continue: cont }) } });
    const list = await listAllPages(async (cont) => (cont ? plain(['b']) : plain(['a'], 'next')));
    expect(list.items.map((i) => i.metadata?.name)).toEqual(['a', 'b']);
  });

  it('propagates a failing page (the informer restarts the whole list)', async () => {
    await expect(
      listAllPages(async (cont) => {
        if (cont) throw new Error('410 Gone');
        return page(['a'], 'next', '1');
      }),
    ).rejects.toThrow('410 Gone');
  });
});
