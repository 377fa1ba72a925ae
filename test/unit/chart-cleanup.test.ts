// The chart's post-delete hook deletes the operator's run-time objects by name and label; those
// names live in src/. This keeps the two from drifting apart.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { GROUP, LABEL_MANAGED_BY, LABEL_SANDBOX, MANAGED_BY_VALUE, SANDBOX_LABEL_VALUE, VERSION } from '../../src/api/v1alpha1/index.js';
import { SANDBOX_NETWORK_POLICY_NAME } from '../../src/sandbox/networkpolicy.js';
import { FETCHER_NETWORK_POLICY_NAME } from '../../src/packages/fetcher.js';
import { LABEL_RUNTIME_HASH } from '../../src/sandbox/runtime-configmap.js';
import { LEADER_LEASE } from '../../src/controller/pool-controller.js';

const hook = readFileSync('charts/codemode-operator/templates/cleanup-hook.yaml', 'utf8');
const leaseName = LEADER_LEASE;

describe('charts/codemode-operator cleanup hook', () => {
  it.each([
    ['the sandbox NetworkPolicy', `'${SANDBOX_NETWORK_POLICY_NAME}'`],
    ['the package fetchers’ NetworkPolicy', `'${FETCHER_NETWORK_POLICY_NAME}'`],
    ['the runtime ConfigMaps (by label)', `labelSelector: '${LABEL_RUNTIME_HASH}'`],
    ['the leader Lease', `'${String(leaseName)}'`],
    ['the sandbox pod label', `'${LABEL_SANDBOX}=${SANDBOX_LABEL_VALUE}'`],
    ["the operator's pod label (self-check pods)", `'${LABEL_MANAGED_BY}=${MANAGED_BY_VALUE}'`],
    ['the API group and version', `group: '${GROUP}', version: '${VERSION}'`],
  ])('names %s as src/ does', (_, text) => {
    expect(leaseName).toBeDefined();
    expect(hook).toContain(text);
  });

  it('may delete only those objects by name', () => {
    expect(hook).toContain(`resourceNames: [${SANDBOX_NETWORK_POLICY_NAME}, ${FETCHER_NETWORK_POLICY_NAME}]`);
    expect(hook).toContain(`resourceNames: [${String(leaseName)}]`);
  });
});
