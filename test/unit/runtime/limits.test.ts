// The kernels' own bounds on what they send and accept (runtime/PROTOCOL.md, "Limits"): exception
// texts are capped like output, requests above the gateway's largest are refused, and the Python
// kernel is non-dumpable, so same-uid user programs cannot reach its descriptors.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSession, type Language } from './harness.js';

const CAP = 1000;
const MAX_REQUEST_BYTES = 4 * 1024 * 1024;

const floods: Record<'python' | 'node', { message: string; name: string }> = {
  python: { message: 'raise ValueError("m" * 1_000_000)', name: 'raise type("E" * 5000, (Exception,), {})("x")' },
  node: {
    message: 'throw new Error("m".repeat(1_000_000))',
    name: 'class E extends Error {}; const e = new E("x"); Object.defineProperty(e, "name", { value: "E".repeat(5000) }); throw e',
  },
};

describe.each(['python', 'node'] as const)('%s kernel limits', (language: 'python' | 'node') => {
  let session: Awaited<ReturnType<typeof startSession>>;
  beforeAll(async () => {
    session = await startSession(language as Language);
  });
  afterAll(() => session.stop());

  it('caps an exception message and its traceback to capChars', async () => {
    const { frame } = await session.client.exec(floods[language].message, { capChars: CAP });
    expect(frame.status).toBe('error');
    expect(frame.error?.evalue.length).toBeLessThanOrEqual(CAP);
    expect(frame.error?.evalue).toMatch(/^m+$/);
    expect(frame.error?.traceback.length).toBeLessThanOrEqual(CAP);
    // Reported as cut, like cut output: the traceback becomes the call's stderr.
    expect(frame.truncated).toBe(true);
  });

  it('does not report an exception that fits as cut', async () => {
    const { frame } = await session.client.exec(language === 'python' ? 'raise ValueError("short")' : 'throw new Error("short")', { capChars: CAP });
    expect(frame.status).toBe('error');
    expect(frame.truncated ?? false).toBe(false);
  });

  it('caps an exception type name to 200 characters', async () => {
    const { frame } = await session.client.exec(floods[language].name, { capChars: CAP });
    expect(frame.error?.ename).toMatch(/^E+$/);
    expect(frame.error?.ename.length).toBe(200);
    expect(frame.truncated).toBe(true);
  });

  it('refuses a request frame above the largest the gateway sends, and keeps serving others', async () => {
    const c = await session.kernel.connect();
    c.writeRaw(`${MAX_REQUEST_BYTES + 1}\n`);
    await c.closed; // the kernel closed this connection, so the relay exited
    const { frame } = await session.client.exec('1 + 1', { capChars: CAP });
    expect(frame.status).toBe('ok');
  });

  it('still accepts a request of the largest size the gateway sends', async () => {
    // 256 KiB of code that JSON-escapes six-fold, plus 256 KiB of such stdin.
    const code = `${language === 'python' ? '#' : '//'} ${'\u0001'.repeat(256 * 1024 - 8)}\n1`;
    const { frame } = await session.client.exec(code, { capChars: CAP, stdin: '\u0002'.repeat(256 * 1024) });
    expect(frame.status).toBe('ok');
  });
});

describe('python kernel hardening', () => {
  it('is non-dumpable, so same-uid programs cannot open its /proc fds or ptrace it', async () => {
    const session = await startSession('python');
    try {
      const { frame } = await session.client.exec('import ctypes\nctypes.CDLL(None).prctl(3, 0, 0, 0, 0)');
      expect(frame.result).toBe('0');
      expect(session.kernel.stderr).toMatch(/"undumpable": true/);
      // Programs it starts exec, which makes them dumpable again: ordinary processes.
      const child = await session.client.exec(
        'import subprocess\nsubprocess.run(["python3", "-c", "import ctypes; print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"]).returncode',
      );
      expect(child.frame.stdout).toBe('1\n');
    } finally {
      await session.stop();
    }
  });
});
