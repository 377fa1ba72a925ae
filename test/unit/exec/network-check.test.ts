// The runner's network check (src/exec/runner.ts), run by sh against a local port standing in for
// the API server's Service: code starts at once when the port refuses, and never while it answers,
// whichever program makes the check (python3, node, bash: a PATH with only that one), and a broken
// interpreter hands the check over to the next.
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiStandIn, type ApiStandIn } from '../helpers/api-stand-in.js';
import { NETWORK_CHECK_EXIT, NETWORK_CHECK_JS, NETWORK_CHECK_PY, NETWORK_CHECK_SCRIPT, NETWORK_CHECK_SECONDS } from '../../../src/exec/runner.js';

let ports: ApiStandIn;
let openPort = 0;
let closedPort = 0;
const dirs: string[] = [];

/** The real executable of a program on this machine's PATH (python3 may be a pyenv shim, a script that needs the full PATH). */
function real(program: string): string {
  if (program === 'python3') return execFileSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).trim();
  if (program === 'node') return process.execPath;
  return execFileSync('/bin/sh', ['-c', `command -v ${program}`], { encoding: 'utf8' }).trim();
}

/** A PATH holding only these programs (`sleep` always: bash's check uses it), real or written as sh scripts. */
function pathWith(programs: string[], scripts: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'netcheck-path-'));
  dirs.push(dir);
  for (const p of ['sleep', ...programs]) symlinkSync(real(p), join(dir, p));
  for (const [name, body] of Object.entries(scripts)) {
    writeFileSync(join(dir, name), `#!/bin/sh\n${body}\n`);
    chmodSync(join(dir, name), 0o755);
  }
  return dir;
}

beforeAll(async () => {
  ports = await apiStandIn();
  ({ openPort, closedPort } = ports);
});
afterAll(async () => {
  await ports.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Ran {
  status: number | null;
  stdout: string;
  stderr: string;
}

function run(file: string, args: string[], env: Record<string, string>): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(file, args, { env, encoding: 'utf8', timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? (err as { code?: unknown }).code : 0;
      resolve({ status: typeof code === 'number' ? code : null, stdout, stderr });
    });
  });
}

const check = (env: Record<string, string>, path = process.env.PATH ?? ''): Promise<Ran> =>
  run('/bin/sh', ['-c', `${NETWORK_CHECK_SCRIPT}echo started`], { PATH: path, ...env });

const to = (port: () => number) => () => ({ CODEMODE_NETWORK_CHECK: '1', KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(port()) });

describe('the network check before code starts', () => {
  it.concurrent.each([
    ['the API server refuses (policy in place)', to(() => closedPort)],
    ['the check is off (network accepted as unenforced)', () => ({ KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(openPort) })],
    ['no API server address in the pod', () => ({ CODEMODE_NETWORK_CHECK: '1' })],
    ['the Service port is not a number (python3 tries 443, which refuses here)', () => ({ ...to(() => closedPort)(), KUBERNETES_SERVICE_PORT: 'https' })],
  ])('lets the code start when %s', async (_name, env) => {
    expect(await check(env())).toEqual({ status: 0, stdout: 'started\n', stderr: '' });
  });

  it.concurrent.each([[['python3']], [['node']], [['bash']], [['python3', 'node', 'bash']]])(
    'with %j on the PATH, starts code when the API server refuses and refuses it while the server answers',
    async (programs) => {
      const path = pathWith(programs);
      expect(await check(to(() => closedPort)(), path)).toEqual({ status: 0, stdout: 'started\n', stderr: '' });
      const r = await check(to(() => openPort)(), path);
      expect(r.status).toBe(125);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain(`could still reach the network ${NETWORK_CHECK_SECONDS} s after it started`);
    },
    90_000,
  );

  it.concurrent.each([
    ['python3 that fails', ['bash'], { python3: 'echo broken >&2; exit 1' }],
    ['python3 and node that fail', ['bash'], { python3: 'exit 1', node: 'exit 2' }],
    ['python3 killed by a signal', ['node'], { python3: 'kill -9 $$' }],
  ])(
    'hands the check on past %s, starting code quietly when refused and refusing it while the server answers',
    async (_name, programs, scripts) => {
      const path = pathWith(programs, scripts);
      expect(await check(to(() => closedPort)(), path)).toEqual({ status: 0, stdout: 'started\n', stderr: '' });
      const r = await check(to(() => openPort)(), path);
      expect(r.status).toBe(125);
    },
    90_000,
  );

  it.concurrent(
    'refuses while the API server can be reached even when bash is slow to start (a loaded node)',
    async () => {
      // A bash that takes 0.5 s to start: a connect timed together with bash's start-up (0.3 s)
      // would never answer in time, and the pod would pass as isolated.
      const path = pathWith([], { bash: `sleep 0.5\nexec ${real('bash')} "$@"` });
      const r = await check(to(() => openPort)(), path);
      expect(r.status).toBe(125);
    },
    90_000,
  );

  it.concurrent('is skipped in an image with none of python3, node and bash', async () => {
    expect(await check(to(() => openPort)(), pathWith([]))).toEqual({ status: 0, stdout: 'started\n', stderr: '' });
  });
});

describe('the check programs', () => {
  const programs: Array<[string, (host: string, port: string) => Promise<Ran>]> = [
    ['python3', (h, p) => run(real('python3'), ['-I', '-S', '-c', NETWORK_CHECK_PY, h, p], {})],
    ['node', (h, p) => run(process.execPath, ['-e', NETWORK_CHECK_JS, h, p], {})],
  ];
  it.concurrent.each(programs)('%s exits "refused" for a refused connect', async (_name, program) => {
    expect((await program('127.0.0.1', String(closedPort))).status).toBe(NETWORK_CHECK_EXIT.refused);
  });
  it.concurrent('python3 exits "refused" for an address it cannot connect to at all (as bash\'s /dev/tcp fails)', async () => {
    expect((await programs[0]![1]('127.0.0.1', '70000')).status).toBe(NETWORK_CHECK_EXIT.refused);
  });
  it.concurrent.each(programs)(
    '%s exits "reachable" after its tries while the port answers, having connected more than once',
    async (_name, program) => {
      const before = ports.accepted();
      expect((await program('127.0.0.1', String(openPort))).status).toBe(NETWORK_CHECK_EXIT.reachable);
      expect(ports.accepted() - before).toBeGreaterThan(1);
    },
    90_000,
  );
});
