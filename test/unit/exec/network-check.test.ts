// The runner's network check (src/exec/runner.ts), run by sh against a local port standing in for
// the API server's Service: code starts at once when the port refuses, and never while it answers.
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiStandIn, type ApiStandIn } from '../helpers/api-stand-in.js';
import { NETWORK_CHECK_SCRIPT, NETWORK_CHECK_SECONDS } from '../../../src/exec/runner.js';

let ports: ApiStandIn;
let openPort = 0;
let closedPort = 0;

beforeAll(async () => {
  ports = await apiStandIn();
  ({ openPort, closedPort } = ports);
});
afterAll(() => ports.close());

function check(env: Record<string, string>): { status: number | null; stderr: string } {
  const r = spawnSync('/bin/sh', ['-c', `${NETWORK_CHECK_SCRIPT}echo started`], {
    env: { PATH: process.env.PATH ?? '', ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  expect(r.error).toBeUndefined();
  return { status: r.status, stderr: r.stderr };
}

describe('the network check before code starts', () => {
  it.each([
    [
      'the API server refuses (policy in place)',
      () => ({ CODEMODE_NETWORK_CHECK: '1', KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(closedPort) }),
    ],
    ['the check is off (network accepted as unenforced)', () => ({ KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(openPort) })],
    ['no API server address in the pod', () => ({ CODEMODE_NETWORK_CHECK: '1' })],
  ])('lets the code start when %s', (_name, env) => {
    expect(check(env())).toEqual({ status: 0, stderr: '' });
  });

  it('refuses to start code while the API server can be reached, after its tries', () => {
    const r = check({ CODEMODE_NETWORK_CHECK: '1', KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(openPort) });
    expect(r.status).toBe(125);
    expect(r.stderr).toContain(`could still reach the network ${NETWORK_CHECK_SECONDS} s after it started`);
  }, 90_000);
});
