// The runner's network check (src/exec/runner.ts), run by sh against a local port standing in for
// the API server's Service: code starts at once when the port refuses, and never while it answers.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

function check(env: Record<string, string>, path = process.env.PATH ?? ''): { status: number | null; stderr: string } {
  const r = spawnSync('/bin/sh', ['-c', `${NETWORK_CHECK_SCRIPT}echo started`], {
    env: { PATH: path, ...env },
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

  it('refuses while the API server can be reached even when bash is slow to start (a loaded node)', () => {
    // A bash that takes 0.5 s to start: a connect timed together with bash's start-up (0.3 s)
    // would never answer in time, and the pod would pass as isolated.
    const dir = mkdtempSync(join(tmpdir(), 'slow-bash-'));
    try {
      const bash = execFileSync('/bin/sh', ['-c', 'command -v bash'], { encoding: 'utf8' }).trim();
      writeFileSync(join(dir, 'bash'), `#!/bin/sh\nsleep 0.5\nexec ${bash} "$@"\n`);
      chmodSync(join(dir, 'bash'), 0o755);
      const r = check(
        { CODEMODE_NETWORK_CHECK: '1', KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(openPort) },
        `${dir}:${process.env.PATH ?? ''}`,
      );
      expect(r.status).toBe(125);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
