// The bash session kernel (runtime/python/kernel.py --language bash), through its relay.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processExists, startSession, type RelayClient } from './harness.js';

describe('bash kernel', () => {
  let session: Awaited<ReturnType<typeof startSession>>;
  let client: RelayClient;
  beforeAll(async () => {
    session = await startSession('bash');
    client = session.client;
  });
  afterAll(() => session.stop());

  it('answers ping', async () => {
    expect((await client.ping()).frame).toMatchObject({ type: 'pong', language: 'bash' });
  });

  it('keeps the working directory, variables and functions across calls', async () => {
    await client.exec('mkdir -p sub && cd sub\nexport GREETING=hello\nlocal_var=kept\nshout() { echo "$1!"; }');
    const { frame } = await client.exec('basename "$PWD"; echo "$GREETING $local_var"; bash -c \'echo "child sees $GREETING"\'; shout hey');
    expect(frame).toMatchObject({ status: 'ok', exitCode: 0, stdout: 'sub\nhello kept\nchild sees hello\nhey!\n' });
  });

  it.each([
    ['success', 'true', 0],
    ['a failing last command', 'echo out; false', 1],
    ['an explicit status', '(exit 7)', 7],
  ])('reports the exit code of the last command: %s', async (_name, code, exitCode) => {
    const { frame } = await client.exec(code);
    expect(frame).toMatchObject({ status: 'ok', exitCode });
  });

  it('captures stdout and stderr per call, keeping text without a final newline', async () => {
    const { frame } = await client.exec("echo out; echo err >&2; printf 'no newline'");
    expect(frame).toMatchObject({ stdout: 'out\nno newline', stderr: 'err\n', stdoutBytes: 14, stderrBytes: 4 });
    expect((await client.exec('echo next')).frame).toMatchObject({ stdout: 'next\n', stderr: '' });
  });

  it('treats ! literally and feeds stdin to the commands', async () => {
    expect((await client.exec('echo "wow!"')).frame.stdout).toBe('wow!\n');
    expect((await client.exec('tr a-z A-Z', { stdin: 'shout\n' })).frame.stdout).toBe('SHOUT\n');
  });

  // JSON may carry a lone surrogate: bash gets the bytes it names, not a KernelError.
  it.each([
    ['code', "echo 'a\ud800b'", {}],
    ['stdin', 'cat', { stdin: 'a\ud800b\n' }],
  ])('takes a lone surrogate in its %s', async (_name, code, options) => {
    expect((await client.exec(code, options)).frame).toMatchObject({ status: 'ok', exitCode: 0, stdout: 'a\ufffd\ufffd\ufffdb\n' });
  });

  it('caps kept output and counts every byte', async () => {
    const { frame } = await client.exec('head -c 100000 /dev/zero | tr "\\0" x', { capChars: 100 });
    expect(frame).toMatchObject({ stdout: 'x'.repeat(100), stdoutBytes: 100000, truncated: true });
  });

  it('streams output while the command runs', async () => {
    const { frame, outputs, at } = await client.exec('for i in 1 2 3 4; do echo $i; sleep 0.1; done');
    expect(frame.stdout).toBe('1\n2\n3\n4\n');
    expect(at - (outputs[0]?.at ?? at)).toBeGreaterThan(200);
  });

  it('kills the running command at the timeout and keeps the shell and its state', async () => {
    const { frame } = await client.exec("sh -c 'echo $$; exec sleep 100'", { timeoutMs: 300 });
    expect(frame.status).toBe('timeout');
    expect(frame.exitCode).toBeUndefined();
    const pid = Number(frame.stdout.trim());
    expect(pid).toBeGreaterThan(0);
    expect(processExists(pid)).toBe(false);
    const after = (await client.exec('basename "$PWD"; echo $GREETING')).frame;
    expect(after).toMatchObject({ status: 'ok', stdout: 'sub\nhello\n' });
  });

  it('interrupts a loop that runs inside the shell itself', async () => {
    expect((await client.exec('while :; do :; done', { timeoutMs: 300 })).frame.status).toBe('timeout');
    expect((await client.exec('echo $GREETING')).frame.stdout).toBe('hello\n');
  });

  // Redirecting the shell's own stdout or stderr for the rest of the session is the code's
  // business: the kernel's end markers still arrive, so the call ends at once and the shell keeps its state.
  it.each([
    ['stdout to /dev/null', 'exec 3>&1 >/dev/null', 'echo hidden; echo shown >&3', 'shown\n', ''],
    ['stderr to /dev/null', 'exec 2>/dev/null', 'echo out; echo hidden >&2', 'out\n', ''],
    ['stdout to stderr', 'exec 3>&1 >&2', 'echo moved; echo direct >&3', 'direct\n', 'moved\n'],
    ['stderr, closed', 'exec 2>&-', 'echo out', 'out\n', ''],
  ])('keeps the shell when the code redirects %s', async (_name, redirect, code, stdout, stderr) => {
    const { client: c, stop } = await startSession('bash');
    try {
      expect((await c.exec(`kept=yes; ${redirect}`, { timeoutMs: 3000 })).frame).toMatchObject({ status: 'ok', exitCode: 0 });
      expect((await c.exec(code, { timeoutMs: 3000 })).frame).toMatchObject({ status: 'ok', stdout, stderr });
      expect((await c.exec('[ "$kept" = yes ]', { timeoutMs: 3000 })).frame).toMatchObject({ status: 'ok', exitCode: 0 });
    } finally {
      await stop();
    }
  });

  it('starts a new shell when the code exits the shell, and says so', async () => {
    const { frame } = await client.exec('exit 3');
    expect(frame).toMatchObject({ status: 'ok', exitCode: 3 });
    expect(frame.stderr).toContain('a new shell was started');
    expect((await client.exec('echo "[$GREETING]"')).frame).toMatchObject({ status: 'ok', stdout: '[]\n' });
  });
});
