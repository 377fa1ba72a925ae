import type { KubernetesObject } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { withoutManagedFields } from '../../../src/kube/informer.js';

const mf = [{ manager: 'kubelet', operation: 'Update', fieldsV1: { 'f:status': {} } }];

describe('withoutManagedFields', () => {
  it.each<[string, KubernetesObject, KubernetesObject]>([
    [
      'drops managedFields, keeps the rest',
      { kind: 'Pod', metadata: { name: 'p', resourceVersion: '7', labels: { a: 'b' }, managedFields: mf } },
      { kind: 'Pod', metadata: { name: 'p', resourceVersion: '7', labels: { a: 'b' } } },
    ],
    ['no managedFields: unchanged', { kind: 'Pod', metadata: { name: 'p' } }, { kind: 'Pod', metadata: { name: 'p' } }],
    ['no metadata: unchanged', { kind: 'Pod' }, { kind: 'Pod' }],
  ])('%s', (_name, input, expected) => {
    const before = structuredClone(input);
    expect(withoutManagedFields(input)).toEqual(expected);
    expect(input).toEqual(before);
  });
});
