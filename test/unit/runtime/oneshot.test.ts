// One-shot runs (op "run") in the python kernel, as a warm pool pod serves a transient run: a
// fresh program per run, exit codes, stdin, capped streamed output, and the deadline.
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { processRunning, startSession } from './harness.js';

type Session = Awaited<ReturnType<typeof startSession>>;

describe('one-shot runs in the python kernel', () => {
  let session: Session | undefined;
  afterEach(async () => {
    await session?.stop();
    session = undefined;
  });
  const start = async (prestart = true): Promise<Session> => (session = await startSession('python', prestart ? ['--prestart'] : []));

  it('runs python in the prestarted interpreter as __main__, in a fresh namespace', async () => {
    const { client } = await start();
    const { frame } = await client.run('python', 'import sys\nprint(__name__, sys.argv[0])\nprint(sorted(k for k in globals() if not k.startswith("__")))');
    expect(frame).toMatchObject({ status: 'ok', exitCode: 0, timedOut: false, oomKilled: false, stderr: '' });
    expect(frame.stdout).toBe("__main__ /workspace/main.py\n['sys']\n");
  });

  // A profile's modules (--preimport): in sys.modules before the code arrives, in the prestarted
  // interpreter and in the session; what importing printed is nobody's output; a module that does
  // not exist is skipped.
  it("pre-imports a profile's modules quietly in the prestarted interpreter and the session", async () => {
    const { client, kernel } = await (session = await startSession('python', ['--prestart', '--preimport', 'sqlite3,this,no_such_module_x']));
    const check = 'import sys\nprint([m in sys.modules for m in ("sqlite3", "this", "no_such_module_x")])';
    const { frame } = await client.run('python', check);
    expect(frame).toMatchObject({ status: 'ok', exitCode: 0, stdout: '[True, True, False]\n', stderr: '' });
    expect((await client.exec(check)).frame).toMatchObject({ stdout: '[True, True, False]\n', stderr: '' });
    expect(kernel.stderr).toMatch(/Could not pre-import a module.*no_such_module_x/);
  });

  it('imports nothing ahead without --preimport', async () => {
    const { client } = await start();
    expect((await client.run('python', 'import sys\nprint("sqlite3" in sys.modules)')).frame).toMatchObject({ stdout: 'False\n' });
  });

  // The kernel writes what fits the code pipe's buffer (64 KiB) at once and leaves the rest to a
  // thread: a program of any length must arrive whole, in order.
  it.each([
    ['a short program', 10],
    ['a program just under the pipe buffer', 64 * 1024 - 200],
    ['a program just over the pipe buffer', 64 * 1024 + 200],
    ['a program of 250 KiB', 250 * 1024],
  ])('gives the prestarted interpreter %s whole', async (_name, bytes) => {
    const { client } = await start();
    const text = Array.from({ length: Math.ceil(bytes / 7) }, (_, i) => (i % 1000).toString(36).padStart(7, '.'))
      .join('')
      .slice(0, bytes);
    const code = `import hashlib\ns = "${text}"\nprint(len(s), hashlib.sha256(s.encode()).hexdigest())\n`;
    const { frame } = await client.run('python', code);
    expect(frame).toMatchObject({ status: 'ok', exitCode: 0, stderr: '' });
    expect(frame.stdout).toBe(`${text.length} ${createHash('sha256').update(text).digest('hex')}\n`);
  });

  it('starts an interpreter on demand when none was prestarted, and for a second run', async () => {
    const { client } = await start(false);
    expect((await client.run('python', 'print(6 * 7)')).frame).toMatchObject({ status: 'ok', exitCode: 0, stdout: '42\n' });
    expect((await client.run('python', 'print("again")')).frame).toMatchObject({ exitCode: 0, stdout: 'again\n' });
  });

  it.each([
    ['sys.exit(3)', 'import sys\nsys.exit(3)', 3],
    ['an exception', 'x = 1\nraise ValueError("bad value")', 1],
    ['a syntax error', 'print(1', 1],
  ])('reports the exit code of %s', async (_name, code, exitCode) => {
    const { client } = await start();
    const { frame } = await client.run('python', code);
    expect(frame).toMatchObject({ status: 'ok', exitCode, timedOut: false });
  });

  // The prestarted interpreter leaves with os._exit after doing by hand what interpreter exit does
  // that a program can see: its runs must end exactly like a plain `python3 -u main.py` (the run
  // after the first, for which the kernel starts an interpreter on demand).
  it.each([
    ['sys.exit with a message', 'import sys\nsys.exit("bye")'],
    ['sys.exit(None)', 'import sys\nprint("a")\nsys.exit(None)'],
    ['sys.exit(256)', 'import sys\nsys.exit(256)'],
    ['an atexit handler', 'import atexit\natexit.register(lambda: print("at exit"))\nprint("main")'],
    [
      'a non-daemon thread still running',
      'import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.3), print("thread done"))).start()\nprint("main done")',
    ],
    ['output without a newline on both streams', 'import sys\nsys.stdout.write("out")\nsys.stderr.write("err")'],
  ])('ends a prestarted run like a plain interpreter: %s', async (_name, code) => {
    const { client } = await start();
    const pick = (f: { exitCode?: number; stdout?: string; stderr?: string }): Record<string, unknown> => ({
      exitCode: f.exitCode,
      stdout: f.stdout,
      stderr: f.stderr,
    });
    const prestarted = pick((await client.run('python', code)).frame);
    const plain = pick((await client.run('python', code)).frame);
    expect(prestarted).toEqual(plain);
  });

  it('shows the user code in a traceback, not the bootstrap', async () => {
    const { client } = await start();
    const { frame } = await client.run('python', 'def fail():\n    raise ValueError("bad value")\nfail()');
    expect(frame.exitCode).toBe(1);
    expect(frame.stderr).toContain('File "/workspace/main.py", line 2, in fail');
    expect(frame.stderr).toContain('raise ValueError("bad value")');
    expect(frame.stderr).toContain('ValueError: bad value');
    expect(frame.stderr).not.toContain('<string>');
  });

  it('feeds stdin and runs bash, sh and node programs', async () => {
    const { client } = await start();
    expect((await client.run('python', 'import sys\nprint(sys.stdin.read().upper())', { stdin: 'piped' })).frame.stdout).toBe('PIPED\n');
    expect((await client.run('bash', 'read x; echo "got $x"; exit 4', { stdin: 'hi\n' })).frame).toMatchObject({ exitCode: 4, stdout: 'got hi\n' });
    expect((await client.run('sh', 'echo err >&2; false')).frame).toMatchObject({ exitCode: 1, stderr: 'err\n' });
    expect((await client.run('node', 'console.log([1, 2].map((x) => x * 2).join(","))')).frame).toMatchObject({ exitCode: 0, stdout: '2,4\n' });
  });

  it('caps kept output, counts every byte and streams what it keeps', async () => {
    const { client } = await start();
    const { frame, outputs } = await client.run('python', 'import sys\nsys.stdout.write("x" * 100000)', { capChars: 1000 });
    expect(frame).toMatchObject({ exitCode: 0, stdoutBytes: 100000, truncated: true });
    expect(frame.stdout).toBe('x'.repeat(1000));
    expect(outputs.map((o) => o.text).join('')).toBe('x'.repeat(1000));
  });

  // JSON may carry a lone surrogate: the program gets the bytes it names (and may reject them), not a KernelError.
  it.each([
    ['in its code', 'python', "print('\ud800')", {}, { exitCode: 1, stderr: expect.stringMatching(/SyntaxError|UnicodeEncodeError/) }],
    ['in its stdin', 'bash', 'cat', { stdin: 'a\ud800b' }, { exitCode: 0, stdout: 'a\ufffd\ufffd\ufffdb' }],
  ])('runs a program with a lone surrogate %s', async (_name, language, code, options, expected) => {
    const { client } = await start();
    expect((await client.run(language, code, options)).frame).toMatchObject({ status: 'ok', ...expected });
  });

  it('stops the program and everything it started at the deadline', async () => {
    const { client } = await start();
    const { frame } = await client.run('bash', 'sleep 60 & echo $!; sleep 60', { timeoutMs: 500 });
    expect(frame).toMatchObject({ status: 'timeout', timedOut: true, exitCode: 124 });
    const child = Number(frame.stdout.trim());
    expect(child).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 100));
    expect(processRunning(child)).toBe(false);
  });

  // A program that closed its stdout and stderr keeps its deadline (the run used to wait for its exit, unbounded).
  it.each([
    ['bash', 'exec >&- 2>&-\nsleep 60'],
    ['python', 'import os, time\nos.close(1)\nos.close(2)\ntime.sleep(60)'],
  ])('stops a %s program that closed its output at the deadline', async (language, code) => {
    const { client } = await start();
    const { frame } = await client.run(language, code, { timeoutMs: 500 });
    expect(frame).toMatchObject({ status: 'timeout', timedOut: true, exitCode: 124 });
    expect(frame.durationMs).toBeLessThan(5000);
  });

  it('ends the run when the program exits, killing what it left in the background', async () => {
    const { client } = await start();
    const t0 = performance.now();
    const { frame } = await client.run('bash', 'sleep 60 & echo $!', { timeoutMs: 20_000 });
    expect(frame).toMatchObject({ status: 'ok', exitCode: 0, timedOut: false });
    expect(performance.now() - t0).toBeLessThan(10_000);
    await new Promise((r) => setTimeout(r, 100));
    expect(processRunning(Number(frame.stdout.trim()))).toBe(false);
  });

  // Issue 14: a process that left the program's group (setsid) and kept writing kept the run open
  // after the program exited, until the gateway gave up on the kernel (ExecFailed). The run ends
  // with the program's own exit code; the escapee loses its pipe (here it then dies of SIGPIPE).
  it('ends the run when the program exits even if a setsid escapee keeps writing', async () => {
    const { client } = await start();
    const escapee = 'setsid timeout 30 yes &\nsleep 0.3\necho main\nexit 3';
    const { frame } = await client.run('bash', escapee, { timeoutMs: 60_000 });
    expect(frame).toMatchObject({ status: 'ok', exitCode: 3, timedOut: false, processLimit: false });
    // The escapee writes without a pause for 30 s: the run must not have waited for it.
    expect(frame.durationMs).toBeLessThan(20_000);
  }, 40_000);

  it('refuses a language it cannot start', async () => {
    const { client } = await start();
    const { frame } = await client.run('ruby', 'puts 1');
    expect(frame).toMatchObject({ status: 'error', error: { ename: 'ProtocolError' } });
  });
});

// A gateway replica that sent a run can stop before the result arrives: another one asks the
// pod's kernel with `recall` and the run's key (runtime/PROTOCOL.md, "Recall").
describe('recalling a run in the python kernel', () => {
  /** Until the kernel says a call runs (at most 5 s). */
  const untilBusy = async (client: Session['client']): Promise<void> => {
    for (let i = 0; i < 500 && !(await client.ping()).frame.busy; i++) await new Promise((r) => setTimeout(r, 10));
  };
  let session: Session | undefined;
  afterEach(async () => {
    await session?.stop();
    session = undefined;
  });

  it('answers a recall made while the run goes on once it ends, after its client went away', async () => {
    session = await startSession('python', ['--prestart']);
    const { client, kernel } = session;
    const sent = client.run('python', 'import time\nprint("before")\ntime.sleep(1)\nprint("after")\nraise SystemExit(3)', { key: 'run-a' });
    sent.catch(() => undefined);
    // Once the run has started, its client goes, as a stopped replica's stream.
    await untilBusy(client);
    await client.close();
    const other = await kernel.connect();
    try {
      const { frame } = await other.request({ op: 'recall', key: 'run-a' });
      expect(frame).toMatchObject({ type: 'result', status: 'ok', exitCode: 3, stdout: 'before\nafter\n', timedOut: false });
      expect(frame).not.toHaveProperty('notFound');
      // Asked again, the same answer at once.
      expect((await other.request({ op: 'recall', key: 'run-a' })).frame).toMatchObject({ status: 'ok', exitCode: 3, stdout: 'before\nafter\n' });
    } finally {
      await other.close();
    }
  });

  it('answers with the kept result of a finished run, and notFound for a key it never ran', async () => {
    session = await startSession('python', ['--prestart']);
    const { client } = session;
    const { frame: ran } = await client.run('python', 'print("hi")', { key: 'run-b' });
    const { frame: recalled } = await client.request({ op: 'recall', key: 'run-b' });
    expect(recalled).toEqual({ ...ran, id: recalled.id });
    expect((await client.request({ op: 'recall', key: 'run-c' })).frame).toMatchObject({
      type: 'result',
      status: 'error',
      notFound: true,
      error: { ename: 'NotFound' },
    });
    // A call sent without a key replaces nothing.
    await client.exec('print(2)');
    expect((await client.request({ op: 'recall', key: 'run-b' })).frame).toMatchObject({ status: 'ok', stdout: 'hi\n' });
  });

  it.each<[string, unknown, string | undefined]>([
    ['a proof', 'p'.repeat(32), 'p'.repeat(32)],
    ['no proof', undefined, undefined],
    ['a proof that is not a string', 7, undefined],
    ['an over-long proof', 'p'.repeat(65), undefined],
  ])("keeps a run's result with %s, shown only in recall answers", async (_name, proof, shown) => {
    session = await startSession('python', ['--prestart']);
    const { client } = session;
    const { frame: ran } = await client.run('python', 'print("hi")', { key: 'run-p', ...(proof !== undefined && { proof }) });
    expect(ran).toMatchObject({ status: 'ok', stdout: 'hi\n' });
    expect(ran).not.toHaveProperty('proof');
    const { frame: recalled } = await client.request({ op: 'recall', key: 'run-p' });
    expect(recalled).toMatchObject({ status: 'ok', stdout: 'hi\n' });
    expect((recalled as { proof?: string }).proof).toBe(shown);
  });

  it('lets at most 16 recalls wait for a running run; one more is answered busy at once', async () => {
    session = await startSession('python', ['--prestart']);
    const { client } = session;
    const running = client.run('python', 'import time\ntime.sleep(1)\nprint("done")', { key: 'run-d' });
    await untilBusy(client);
    const waiting = Array.from({ length: 16 }, () => client.request({ op: 'recall', key: 'run-d' }));
    // Sent after the 16 on the same connection: the kernel reads them in order.
    const extra = (await client.request({ op: 'recall', key: 'run-d' })).frame;
    expect(extra).toMatchObject({ status: 'error', busy: true, error: { ename: 'KernelBusy' } });
    for (const r of await Promise.all(waiting)) expect(r.frame).toMatchObject({ status: 'ok', stdout: 'done\n' });
    expect((await running).frame).toMatchObject({ status: 'ok', stdout: 'done\n' });
  });

  it.each([
    ['a recall without a key', { op: 'recall' }, /"key" is required/],
    ['a recall with a key that is not a string', { op: 'recall', key: 7 }, /"key" must be a string/],
    ['a recall with an over-long key', { op: 'recall', key: 'k'.repeat(65) }, /"key" must be a string of 1 to 64/],
    ['a run with a key that is not a string', { op: 'run', language: 'python', code: 'print(1)', key: ['x'] }, /"key" must be a string/],
    ['a session call with an empty key', { op: 'exec', code: 'print(1)', key: '' }, /"key" must be a string of 1 to 64/],
  ])('rejects %s with a ProtocolError', async (_name, message, evalue) => {
    session = await startSession('python');
    const { frame } = await session.client.request(message);
    expect(frame).toMatchObject({ type: 'result', status: 'error', error: { ename: 'ProtocolError' } });
    expect((frame as { error: { evalue: string } }).error.evalue).toMatch(evalue);
  });
});

// A session call whose exec stream broke (an API server or kubelet restart) is read back the same
// way: the gateway sends each call with a key of its own and recalls it over a new stream.
describe.each([
  ['python', 'import time\nprint("before")\ntime.sleep(1)\nprint("after")\nx = 41', 'x + 1', '42'],
  ['bash', 'echo before; sleep 1; echo after; x=41', 'echo $((x + 1))', undefined],
  ['node', 'console.log("before"); await new Promise((r) => setTimeout(r, 1000)); console.log("after"); globalThis.x = 41', 'x + 1', '42'],
] as const)('recalling a session call in the %s kernel', (language, slow, next, nextResult) => {
  let session: Session | undefined;
  afterEach(async () => {
    await session?.stop();
    session = undefined;
  });

  it('answers a recall of a call whose client went away once it ends; the state it made stays', async () => {
    session = await startSession(language);
    const { client, kernel } = session;
    const sent = client.exec(slow, { key: 'call-a' });
    sent.catch(() => undefined);
    for (let i = 0; i < 500 && !(await client.ping()).frame.busy; i++) await new Promise((r) => setTimeout(r, 10));
    await client.close();
    const other = await kernel.connect();
    try {
      const { frame } = await other.request({ op: 'recall', key: 'call-a' });
      expect(frame).toMatchObject({ type: 'result', status: 'ok', stdout: 'before\nafter\n' });
      expect(frame).not.toHaveProperty('notFound');
      const after = (await other.exec(next)).frame;
      expect(after.status).toBe('ok');
      if (nextResult === undefined) expect(after.stdout).toBe('42\n');
      else expect(after.result).toBe(nextResult);
    } finally {
      await other.close();
    }
  });

  it('keeps the last 16 keyed calls: a 16th one after lets the oldest go, unkeyed ones do not', async () => {
    session = await startSession(language);
    const { client } = session;
    const print1 = language === 'node' ? 'console.log(1)' : language === 'bash' ? 'echo 1' : 'print(1)';
    const { frame: first } = await client.exec(print1, { key: 'call-b' });
    expect((await client.request({ op: 'recall', key: 'call-b' })).frame).toEqual({ ...first, id: expect.any(String) });
    await client.exec(next);
    expect((await client.request({ op: 'recall', key: 'call-b' })).frame).toMatchObject({ stdout: '1\n' });
    for (let i = 1; i <= 15; i++) await client.exec(next, { key: `call-${i}` });
    expect((await client.request({ op: 'recall', key: 'call-b' })).frame).toMatchObject({ status: 'ok', stdout: '1\n' });
    await client.exec(next, { key: 'call-16' });
    expect((await client.request({ op: 'recall', key: 'call-b' })).frame).toMatchObject({ status: 'error', notFound: true, error: { ename: 'NotFound' } });
    for (const key of ['call-1', 'call-16']) expect((await client.request({ op: 'recall', key })).frame).not.toHaveProperty('notFound');
  });

  it('lets older results go once the kept texts pass 2,000,000 characters, but keeps the last', async () => {
    session = await startSession(language);
    const { client } = session;
    const big =
      language === 'node' ? 'console.log("x".repeat(1500000))' : language === 'bash' ? "head -c 1500000 /dev/zero | tr '\\0' x; echo" : 'print("x" * 1500000)';
    for (const key of ['big-1', 'big-2']) expect((await client.exec(big, { key, capChars: 2_000_000 })).frame.stdoutBytes).toBe(1_500_001);
    expect((await client.request({ op: 'recall', key: 'big-1' })).frame).toMatchObject({ notFound: true });
    const kept = (await client.request({ op: 'recall', key: 'big-2' })).frame as { stdout: string };
    expect(kept.stdout.length).toBe(1_500_001);
  });

  it.each([
    ['a recall without a key', { op: 'recall' }, /"key" is required/],
    ['a recall with an over-long key', { op: 'recall', key: 'k'.repeat(65) }, /"key" must be a string of 1 to 64/],
    ['a call with a key that is not a string', { op: 'exec', code: '1', key: 5 }, /"key" must be a string/],
  ])('rejects %s with a ProtocolError', async (_name, message, evalue) => {
    session = await startSession(language);
    const { frame } = await session.client.request(message);
    expect(frame).toMatchObject({ type: 'result', status: 'error', error: { ename: 'ProtocolError' } });
    expect((frame as { error: { evalue: string } }).error.evalue).toMatch(evalue);
  });
});
