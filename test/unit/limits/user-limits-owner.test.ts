// Per-user limits count a user's objects by spec.owner.user, the value the admission policy
// guards, never by the owner label: whoever may edit their own objects may remove or change it.
import { describe, expect, it } from 'vitest';
import type { KubernetesObject } from '@kubernetes/client-node';
import { LABEL_OWNER, ownerLabelValue } from '../../../src/api/v1alpha1/index.js';
import { userUsage } from '../../../src/limits/user-limits.js';

const NOW = Date.parse('2026-11-23T12:00:00Z');
const created = new Date(NOW - 1000).toISOString() as unknown as Date;

const labels = (label: string | undefined): Record<string, string> | undefined => (label === undefined ? undefined : { [LABEL_OWNER]: label });
const run = (user: string, label: string | undefined): KubernetesObject =>
  ({ metadata: { name: 'r', creationTimestamp: created, labels: labels(label) }, spec: { owner: { user }, timeoutSeconds: 30 } }) as KubernetesObject;
const session = (user: string, label: string | undefined): KubernetesObject =>
  ({ metadata: { name: 's', labels: labels(label) }, spec: { owner: { user } } }) as KubernetesObject;

describe('userUsage counts by spec.owner.user, whatever the owner label says', () => {
  it.each([
    ['the label the gateway sets', 'alice@example.com', ownerLabelValue('alice@example.com'), 1],
    ['no label (a kubectl-created object, or one whose label was removed)', 'alice@example.com', undefined, 1],
    ["another user's label", 'alice@example.com', 'bob', 1],
    ['the label of the user, another owner', 'bob', ownerLabelValue('alice@example.com'), 0],
  ])('%s', (_n, owner, label, counted) => {
    const u = userUsage([run(owner, label)], [session(owner, label)], new Map(), 'alice@example.com', NOW);
    expect({ runs: u.runs, sessions: u.sessions, executions: u.executions }).toEqual({ runs: counted, sessions: counted, executions: counted });
  });
});
