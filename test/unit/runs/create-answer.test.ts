// Whether a failed SandboxRun create may have stored the run all the same. A run's code can start
// in a reserved pool pod before the create's answer (executeWhileCreating), so a create that may
// have landed is read back until the API server says, and only a certain "not stored" ends the
// call with the create's error.
import { describe, expect, it } from 'vitest';
import { mayHaveBeenCreated } from '../../../src/runs/kube-run-service.js';
import { RunRequestError } from '../../../src/limits/refusal.js';

/** An error as client-node raises it for an HTTP answer. */
const answered = (code: number, body: object = {}): Error => Object.assign(new Error(`HTTP-Code: ${code}`), { code, body: JSON.stringify(body) });
/** As KubeRunService.create wraps it. */
const wrapped = (cause: unknown): Error => new Error('Failed to create SandboxRun in namespace ns', { cause });

describe('mayHaveBeenCreated', () => {
  it.each([
    ['no answer (connection reset)', wrapped(Object.assign(new TypeError('fetch failed'), { cause: new Error('ECONNRESET') })), true],
    ['500 Internal Server Error (e.g. an etcd timeout after the write)', wrapped(answered(500)), true],
    ['503 Service Unavailable', wrapped(answered(503)), true],
    ['504 Gateway Timeout', wrapped(answered(504)), true],
    ['408 Request Timeout', wrapped(answered(408)), true],
    ['409 AlreadyExists (a name taken: read to see whose)', wrapped(answered(409, { kind: 'Status', details: { kind: 'sandboxruns' } })), true],
    ['409 on the quota object (admission: nothing stored)', wrapped(answered(409, { kind: 'Status', details: { kind: 'resourcequotas' } })), false],
    ['400 Bad Request', wrapped(answered(400)), false],
    ['403 Forbidden (RBAC, admission policy)', wrapped(answered(403)), false],
    ['422 Invalid (the CRD schema)', wrapped(answered(422)), false],
    ['429 Too Many Requests (not processed)', wrapped(answered(429)), false],
    ['a quota refusal, as the run service words it', new RunRequestError('The run was refused: the namespace ns is at its ResourceQuota.', 'Retry.'), false],
  ])('%s → %s', (_name, err, expected) => {
    expect(mayHaveBeenCreated(err)).toBe(expected);
  });
});
