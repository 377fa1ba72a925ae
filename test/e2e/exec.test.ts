// The exec layer against a real pod: the runner gets code on stdin, enforces its timeout by
// killing the whole process group (nothing left running in the pod), reports OOM kills, and caps
// output while counting every byte.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execInPod } from '../../src/exec/exec.js';
import { newNonce, parseTrailer, runnerCommand, stripTrailer } from '../../src/exec/runner.js';
import { createNamespace, deleteNamespace, execCapture, runPod, simplePod, testKube } from './helpers/kube.js';

const k = testKube();
let ns = '';

beforeAll(async () => {
  ns = await createNamespace(k, 'exec');
  const pod = simplePod('target', ['sleep', 'infinity']);
  pod.spec!.containers[0]!.resources = { limits: { memory: '128Mi', cpu: '1' } };
  await runPod(k, ns, pod);
});
afterAll(async () => {
  await deleteNamespace(k, ns);
});

async function run(runtime: 'python' | 'bash' | 'node' | 'sh', code: string, timeoutSeconds = 10, stdin = '') {
  const nonce = newNonce();
  const codeBuf = Buffer.from(code);
  const r = await execInPod(k.exec, {
    namespace: ns,
    pod: 'target',
    container: 'main',
    command: runnerCommand(runtime, timeoutSeconds, codeBuf.length, nonce, Buffer.byteLength(stdin)),
    stdin: Buffer.concat([codeBuf, Buffer.from(stdin)]),
    capChars: 1000,
    watchdogMs: (timeoutSeconds + 20) * 1000,
  });
  return { r, trailer: parseTrailer(r.stderrTail, nonce), stderr: stripTrailer(r.stderr.text, nonce) };
}

describe('runner over the exec API', () => {
  it('passes code and stdin separately and reports the exit code in its trailer', async () => {
    const { r, trailer, stderr } = await run('python', 'import sys\nprint(sys.stdin.read()[::-1])\nsys.exit(4)', 10, 'abc');
    expect(r.stdout.text).toBe('cba\n');
    expect(stderr).toBe('');
    expect(r.exitCode).toBe(4);
    expect(trailer).toMatchObject({ exitCode: 4, timedOut: false, oomKilled: false });
  });

  it('answers with the exit status when the program leaves 1 MiB of its stdin unread', async () => {
    // Unread, it kept the exec from answering: the watchdog ended the call without a status.
    const { r, trailer } = await run('python', 'print(1)', 10, 'a'.repeat(1024 * 1024));
    expect(r.error).toBeUndefined();
    expect(r.exitCode).toBe(0);
    expect(r.stdout.text).toBe('1\n');
    expect(trailer).toMatchObject({ exitCode: 0, timedOut: false });
  });

  it('does not interpret shell metacharacters in the code', async () => {
    const { r } = await run('sh', 'echo "$(echo safe)"; echo \'; rm -rf /workspace\' ');
    expect(r.stdout.text).toBe('safe\n; rm -rf /workspace\n');
  });

  it('kills the program and everything it forked at the timeout', async () => {
    const code = 'import os, time\nif os.fork() == 0:\n    while True: time.sleep(0.1)\nwhile True: pass';
    const { trailer } = await run('python', code, 2);
    expect(trailer).toMatchObject({ timedOut: true });
    const ps = await execCapture(k, ns, 'target', ['ps', '-eo', 'stat=,comm=']);
    expect(ps.stdout).not.toContain('python3');
    expect(ps.stdout).toContain('sleep');
  });

  it('reports an out-of-memory kill', async () => {
    const { trailer } = await run('python', 'x = bytearray(512 * 1024 * 1024)\nprint(len(x))', 20);
    expect(trailer?.oomKilled).toBe(true);
    expect(trailer?.exitCode).toBe(137);
  });

  it('keeps at most the cap and counts all bytes', async () => {
    const { r } = await run('bash', 'head -c 300000 /dev/zero | tr "\\0" y; echo; echo e >&2');
    expect(r.stdout.text).toHaveLength(1000);
    expect(r.stdout.truncated).toBe(true);
    expect(r.stdout.byteCount).toBe(300001);
  });
});
