// The Python session kernel (runtime/python), driven through its relay like the gateway does.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Kernel, processExists, startSession, type RelayClient } from './harness.js';

const sleep = (ms: number): Promise<void> => new Promise((res) => setTimeout(res, ms));

describe('python kernel', () => {
  let session: Awaited<ReturnType<typeof startSession>>;
  let client: RelayClient;
  beforeAll(async () => {
    session = await startSession('python');
    client = session.client;
  });
  afterAll(() => session.stop());

  it('answers ping', async () => {
    const { frame } = await client.ping();
    expect(frame).toMatchObject({ type: 'pong', language: 'python', busy: false });
  });

  it('keeps variables, imports and functions across calls', async () => {
    await client.exec('x = 41\nimport math\ndef double(v):\n    return 2 * v');
    expect((await client.exec('x + 1')).frame).toMatchObject({ status: 'ok', result: '42' });
    expect((await client.exec('double(math.floor(2.5))')).frame.result).toBe('4');
    expect((await client.exec('__name__')).frame.result).toBe("'__main__'");
  });

  it.each([
    ['an expression', '1 + 2', '3'],
    ['a string', '"a" * 3', "'aaa'"],
    ['None (no result)', 'None', undefined],
    ['an assignment (no result)', 'y = 5', undefined],
    ['a print call (no result)', 'print("p")', undefined],
  ])('returns the repr of the last expression: %s', async (_name, code, expected) => {
    const { frame } = await client.exec(code);
    expect(frame.status).toBe('ok');
    expect(frame.result).toBe(expected);
  });

  it('captures stdout and stderr per call, including child processes, without leaking', async () => {
    const first = (await client.exec('import os, sys\nprint("one")\nprint("warn", file=sys.stderr)\nos.system("echo child; echo child-err >&2")')).frame;
    expect(first).toMatchObject({ status: 'ok', stdout: 'one\nchild\n', stderr: 'warn\nchild-err\n', stdoutBytes: 10, stderrBytes: 15, result: '0' });
    // Output of a thread that outlives its call is dropped, not given to the next call.
    await client.exec('import threading\nthreading.Timer(0.05, lambda: print("late")).start()');
    await sleep(200);
    const second = (await client.exec('print("two")')).frame;
    expect(second).toMatchObject({ stdout: 'two\n', stderr: '' });
  });

  // What a thread writes after its call ended is nobody's, also a partial line the writers held.
  it.each([
    ['a line', 'print("late")'],
    ['a partial line', 'print("late", end="")'],
    ['a partial line on stderr', 'sys.stderr.write("late")'],
  ])('gives the next call nothing of %s a thread wrote after its call', async (_name, write) => {
    await client.exec(`import sys, threading\nthreading.Timer(0.05, lambda: ${write}).start()`);
    await sleep(200);
    expect((await client.exec('print("two")')).frame).toMatchObject({ stdout: 'two\n', stderr: '' });
  });

  // JSON may carry a lone surrogate: child processes get the bytes it names, not a KernelError.
  it.each([
    ['input()', 'input()', { status: 'ok', result: "'a\\ud800b'" }],
    ['a child process', 'import subprocess\nsubprocess.run(["cat"]).returncode', { status: 'ok', stdout: 'a\ufffd\ufffd\ufffdb\n' }],
  ])('feeds stdin with a lone surrogate to %s', async (_name, code, expected) => {
    expect((await client.exec(code, { stdin: 'a\ud800b\n' })).frame).toMatchObject(expected);
  });

  it('feeds stdin to input() and to child processes', async () => {
    expect((await client.exec('input()', { stdin: 'hello\n' })).frame.result).toBe("'hello'");
    expect((await client.exec('import subprocess\nsubprocess.run(["cat"]).returncode', { stdin: 'piped' })).frame.stdout).toBe('piped');
  });

  it('reports an exception with a traceback of the user code only', async () => {
    const { frame } = await client.exec('def fail():\n    raise ValueError("bad value")\nfail()');
    expect(frame.status).toBe('error');
    expect(frame.error).toMatchObject({ ename: 'ValueError', evalue: 'bad value' });
    expect(frame.error?.traceback).toContain('raise ValueError("bad value")');
    expect(frame.error?.traceback).toMatch(/File "<cell-\d+>", line 2, in fail/);
    expect(frame.error?.traceback).not.toContain('codemode_kernel');
  });

  it('reports a syntax error', async () => {
    const { frame } = await client.exec('x = = 1');
    expect(frame.error).toMatchObject({ ename: 'SyntaxError' });
    expect(frame.error?.traceback).toContain('x = = 1');
  });

  // Whatever the code's exception or value does when the kernel reads it, the call gets its own
  // result with plain strings, and the kernel serves the next call.
  const oddStr =
    'class S(str):\n    def __getitem__(self, i):\n        return 5\n    def __len__(self):\n        return 0\n    def __str__(self):\n        return self\n';
  it.each([
    [
      '__str__ raises SystemExit',
      'class E(Exception):\n    def __str__(self):\n        raise SystemExit(3)\nraise E()',
      { ename: 'E', evalue: '<exception str() failed>' },
    ],
    ['__str__ raises KeyboardInterrupt', 'class E(Exception):\n    def __str__(self):\n        raise KeyboardInterrupt\nraise E()', { ename: 'E' }],
    [
      '__str__ raises',
      'class E(Exception):\n    def __str__(self):\n        raise RuntimeError()\nraise E()',
      { ename: 'E', evalue: '<exception str() failed>' },
    ],
    ['__str__ returns an int', 'class E(Exception):\n    def __str__(self):\n        return 5\nraise E()', { ename: 'E', evalue: '<exception str() failed>' }],
    ['a message of a str subclass', `${oddStr}raise ValueError(S('abc'))`, { ename: 'ValueError', evalue: 'abc' }],
    [
      'a metaclass __name__',
      'class M(type):\n    __name__ = property(lambda c: 5)\nclass E(Exception, metaclass=M):\n    pass\nraise E("x")',
      { ename: 'E', evalue: 'x' },
    ],
    [
      'a SystemExit code whose == raises',
      'class C:\n    def __eq__(self, o):\n        raise KeyboardInterrupt\n    __hash__ = object.__hash__\nraise SystemExit(C())',
      { ename: 'SystemExit' },
    ],
    ['__repr__ raises SystemExit', 'class R:\n    def __repr__(self):\n        raise SystemExit(3)\nR()', { ename: 'SystemExit', evalue: '3' }],
    ['__repr__ raises KeyboardInterrupt', 'class R:\n    def __repr__(self):\n        raise KeyboardInterrupt\nR()', { ename: 'KeyboardInterrupt' }],
  ])('reports an odd exception as the code’s own: %s', async (name, code, error) => {
    const key = `odd-${name.replace(/\W+/g, '-').slice(0, 50)}`;
    const { frame } = await client.exec(code, { key });
    expect(frame).toMatchObject({ status: 'error', error });
    expect(typeof frame.error?.evalue).toBe('string');
    expect(frame.error?.traceback).toContain(`${error.ename}`);
    expect((await client.request({ op: 'recall', key })).frame).toMatchObject({ status: 'error', error });
    expect((await client.exec('1 + 1')).frame.result).toBe('2');
  });

  it.each([
    ['a __repr__ returning a str subclass', `${oddStr}class R:\n    def __repr__(self):\n        return S("abc")\nR()`, 'abc'],
    [
      'a class whose __module__ is not a str',
      'class M(type):\n    __module__ = property(lambda c: 5)\nclass R(metaclass=M):\n    def __repr__(self):\n        return "r"\nR()',
      'r',
    ],
  ])('returns a plain string result for %s', async (_name, code, result) => {
    expect((await client.exec(code)).frame).toMatchObject({ status: 'ok', result });
  });

  it.each([
    ['sys.exit(0) is a success', 'import sys\nsys.exit(0)', 'ok'],
    ['sys.exit(2) is an error', 'import sys\nsys.exit(2)', 'error'],
  ])('does not end the kernel on SystemExit: %s', async (_name, code, status) => {
    expect((await client.exec(code)).frame.status).toBe(status);
    expect((await client.exec('x')).frame.result).toBe('41');
  });

  // A child the code forks and does not end itself ends when it gets back to the kernel, as a
  // multiprocessing child does, instead of answering the call too and then waiting for calls forever
  // (the parent's waitpid would then never return).
  it.each([
    ['falls through', '', 0],
    ['calls sys.exit(3)', 'sys.exit(3)', 3],
    ['raises', 'raise ValueError("in child")', 1],
  ])('ends a forked child that %s', async (_name, tail, exitCode) => {
    const code = [
      'import os, sys',
      'pid = os.fork()',
      "print('child' if pid == 0 else 'parent', flush=True)",
      ...(tail ? [`if pid == 0:\n    ${tail}`] : []),
      'if pid:\n    status = os.WEXITSTATUS(os.waitpid(pid, 0)[1])',
      'pid == 0',
    ].join('\n');
    const { frame } = await client.exec(code, { timeoutMs: 3000 });
    expect(frame).toMatchObject({ status: 'ok', result: 'False' });
    expect(frame.stdout.split('\n').sort()).toEqual(['', 'child', 'parent']);
    expect((await client.exec('status')).frame.result).toBe(String(exitCode));
  });

  // sys.stdout may be the code's own object: its flush after the call runs as the code's, under
  // the timeout, and what it raises ends neither the call's result nor the next calls.
  it.each([
    ['raises KeyboardInterrupt', 'raise KeyboardInterrupt', 'ok'],
    ['raises SystemExit', 'raise SystemExit(2)', 'ok'],
    ['never returns', 'time.sleep(1000)', 'timeout'],
  ])('survives a sys.stdout whose flush %s', async (_name, flush, status) => {
    const code = `import sys, time\nclass W:\n    def write(self, s):\n        return len(s)\n    def flush(self):\n        ${flush}\nsys.stdout = W()\n"set"`;
    expect((await client.exec(code, { timeoutMs: 500 })).frame).toMatchObject({ status });
    expect((await client.exec('import os\nos.write(1, b"fd\\n")\n1', { timeoutMs: 500 })).frame).toMatchObject({ status, stdout: 'fd\n' });
    expect((await client.exec('sys.stdout = sys.__stdout__\nprint("back")')).frame).toMatchObject({ status: 'ok', stdout: 'back\n' });
  });

  // A handler the code installed raises into the code only: an alarm left set that fires
  // between calls (or in the kernel's own code around one) can no longer end the kernel.
  it.each([
    ['between calls', 'None', 'ok', undefined],
    ['during the call', 'time.sleep(1)', 'error', 'ZeroDivisionError'],
  ])('survives a signal handler that raises %s', async (_name, tail, status, ename) => {
    const code = `import signal, time\nsignal.signal(signal.SIGALRM, lambda *a: 1 / 0)\nsignal.setitimer(signal.ITIMER_REAL, 0.2)\n${tail}`;
    const { frame } = await client.exec(code);
    expect(frame).toMatchObject({ status });
    expect(frame.error?.ename).toBe(ename);
    await sleep(400);
    expect((await client.exec('1 + 1')).frame.result).toBe('2');
  });

  it('supports top-level await on a persistent event loop', async () => {
    expect((await client.exec('import asyncio\nawait asyncio.sleep(0.01)\n5')).frame).toMatchObject({ status: 'ok', result: '5' });
    expect((await client.exec('async def get():\n    return 6\nawait get()')).frame.result).toBe('6');
  });

  it('caps kept output and counts every byte', async () => {
    const { frame, outputs } = await client.exec('print("x" * 100000)\nprint("é" * 10, file=__import__("sys").stderr)', { capChars: 1000 });
    expect(frame.stdout).toBe('x'.repeat(1000));
    expect(frame).toMatchObject({ stdoutBytes: 100001, stderr: 'é'.repeat(10) + '\n', stderrBytes: 21, truncated: true });
    // Streamed text is capped the same way.
    expect(
      outputs
        .filter((o) => o.stream === 'stdout')
        .map((o) => o.text)
        .join(''),
    ).toBe(frame.stdout);
  });

  it('streams output while the call runs, coalescing writes', async () => {
    const slow = await client.exec('import time\nfor i in range(5):\n    print(i)\n    time.sleep(0.1)');
    expect(slow.outputs.length).toBeGreaterThanOrEqual(2);
    expect(slow.at - (slow.outputs[0]?.at ?? slow.at)).toBeGreaterThan(250);
    expect(slow.outputs.map((o) => o.text).join('')).toBe('0\n1\n2\n3\n4\n');
    const loop = await client.exec('for i in range(20000):\n    print(i)');
    expect(loop.outputs.length).toBeLessThan(50);
    expect(loop.outputs.map((o) => o.text).join('')).toBe(loop.frame.stdout);
  });

  it.each([
    ['a busy loop', 'while True:\n    pass'],
    // The result's repr is the code's too: interrupted like it, not given up on (lost, the kernel exits).
    ['a __repr__ that loops', 'class R:\n    def __repr__(self):\n        while True:\n            pass\nR()'],
  ])('interrupts %s at the timeout and keeps the session', async (_name, code) => {
    const { frame } = await client.exec(code, { timeoutMs: 300 });
    expect(frame.status).toBe('timeout');
    expect(frame.error?.traceback).toMatch(/while True:|pass/); // the line depends on the Python version
    expect((await client.exec('x + 1')).frame).toMatchObject({ status: 'ok', result: '42' });
  });

  // relay.py hands the exec stream's stdin and stdout to the kernel; no program the kernel (or
  // session code) starts may inherit them: the received descriptors are close-on-exec.
  it('holds the stream its relay handed over, close-on-exec', async () => {
    const code = [
      'import fcntl, gc',
      "conns = [c for c in gc.get_objects() if type(c).__name__ == 'Connection' and c.pipes]",
      'len(conns) > 0 and all(fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC for c in conns for fd in c.pipes)',
    ].join('\n');
    expect((await client.exec(code)).frame).toMatchObject({ status: 'ok', result: 'True' });
  });

  // The watchdog thread sleeps through calls whose deadline comes after the end of its current
  // wait; a call with a nearer deadline must wake it. After calls with a 10-minute timeout (the
  // thread waits until then), a 0.3 s one is interrupted at its own deadline: otherwise it would
  // spin until the test's timeout.
  // Each call arms a last-resort timer (faulthandler: ends the process if the call holds the GIL
  // past its timeout and grace); it is cancelled after the result was sent. Left armed, it would
  // end this idle kernel 5.2 s after a call with a 0.2 s timeout.
  it('cancels a finished call’s last-resort timer: an idle kernel outlives it', async () => {
    expect((await client.exec('idle_check = 1', { timeoutMs: 200 })).frame.status).toBe('ok');
    await sleep(6_500);
    expect((await client.exec('idle_check + 1')).frame).toMatchObject({ status: 'ok', result: '2' });
  }, 15_000);

  it('interrupts a short call that follows calls with a long timeout', async () => {
    for (let i = 0; i < 3; i++) expect((await client.exec(`kept = ${i}`, { timeoutMs: 600_000 })).frame.status).toBe('ok');
    const { frame } = await client.exec('while True:\n    pass', { timeoutMs: 300 });
    expect(frame.status).toBe('timeout');
    expect((await client.exec('kept', { timeoutMs: 600_000 })).frame).toMatchObject({ status: 'ok', result: '2' });
  });

  it('awaits again after the code closed the loop', async () => {
    expect((await client.exec('import asyncio\nasyncio.get_event_loop().close()')).frame.status).toBe('ok');
    expect((await client.exec('import asyncio\nawait asyncio.sleep(0)\n8')).frame).toMatchObject({ status: 'ok', result: '8' });
  });

  it('interrupts an awaiting call at the timeout and keeps the event loop usable', async () => {
    expect((await client.exec('import asyncio\nawait asyncio.sleep(100)', { timeoutMs: 300 })).frame.status).toBe('timeout');
    expect((await client.exec('await asyncio.sleep(0.01)\n7')).frame.result).toBe('7');
  });

  it('kills (and reaps) the processes a timed-out call started', async () => {
    const { frame } = await client.exec('import subprocess, time\np = subprocess.Popen(["sleep", "100"])\nprint(p.pid, flush=True)\ntime.sleep(100)', {
      timeoutMs: 300,
    });
    expect(frame.status).toBe('timeout');
    const pid = Number(frame.stdout.trim());
    expect(pid).toBeGreaterThan(0);
    expect(processExists(pid)).toBe(false);
    expect((await client.exec('x')).frame.result).toBe('41');
  });

  it("does not mark the code's own exception named KernelBusy as busy (that call ran)", async () => {
    const { frame } = await client.exec('class KernelBusy(Exception):\n    pass\nraise KernelBusy("mine")');
    expect(frame).toMatchObject({ status: 'error', error: { ename: 'KernelBusy', evalue: 'mine' } });
    expect(frame.busy).toBeUndefined();
  });

  it('shares one state between two relays and answers busy to the second caller', async () => {
    const other = await session.kernel.connect();
    try {
      await client.exec('shared = 1');
      expect((await other.exec('shared + 1')).frame.result).toBe('2');
      // The call runs until the test releases it, so "busy" is seen however loaded the machine is.
      const release = join(mkdtempSync(join(tmpdir(), 'kernel-busy-')), 'release');
      const running = client.exec(`import os, time\nwhile not os.path.exists(${JSON.stringify(release)}):\n    time.sleep(0.01)\n"done"`);
      for (let i = 0; i < 500 && (await other.ping()).frame.busy !== true; i++) await sleep(10);
      expect((await other.ping()).frame.busy).toBe(true);
      const busy = (await other.exec('1')).frame;
      expect(busy).toMatchObject({ status: 'error', busy: true, error: { ename: 'KernelBusy' } });
      writeFileSync(release, '');
      expect((await running).frame.result).toBe("'done'");
      expect((await other.exec('shared')).frame.result).toBe('1');
    } finally {
      await other.close();
    }
  });

  it.each([
    ['an unknown op', { op: 'nope' }, /unknown op/],
    ['exec without code', { op: 'exec' }, /"code" must be a string/],
    ['a negative timeout', { op: 'exec', code: '1', timeoutMs: -1 }, /"timeoutMs"/],
  ])('rejects %s with a ProtocolError', async (_name, message, evalue) => {
    const { frame } = await client.request(message);
    expect(frame).toMatchObject({ type: 'result', status: 'error', error: { ename: 'ProtocolError' } });
    expect((frame as { error: { evalue: string } }).error.evalue).toMatch(evalue);
  });

  it('resets the namespace and the event loop on request, before or after the loop was made', async () => {
    const other = await Kernel.start('python');
    try {
      const c = await other.connect();
      // Before any call made the loop (made on first use, python_session.py).
      expect((await c.request({ op: 'reset' })).frame).toMatchObject({ status: 'ok' });
      await c.exec('import asyncio\ngone = 1\nloop = asyncio.get_event_loop()\nawait asyncio.sleep(0)');
      expect((await c.request({ op: 'reset' })).frame).toMatchObject({ status: 'ok' });
      expect((await c.exec('gone')).frame.error?.ename).toBe('NameError');
      // A new loop after the reset, and top-level await still works on it.
      expect((await c.exec('import asyncio\nawait asyncio.sleep(0)\nasyncio.get_event_loop().is_closed()')).frame.result).toBe('False');
      await c.close();
    } finally {
      await other.stop();
    }
  });
});

describe('python kernel reset', () => {
  let session: Awaited<ReturnType<typeof startSession>>;
  beforeAll(async () => {
    session = await startSession('python');
  });
  afterAll(() => session.stop());

  // What the code patched in the process-wide Python state is undone too, as a reset promises a fresh session.
  it.each([
    ['a patched print', 'import builtins\nbuiltins.print = lambda *a, **k: None'],
    ['a replaced sys.stdout', 'import sys, io\nsys.stdout = io.StringIO()'],
    ['a closed sys.stdout', 'import sys\nsys.stdout.close()'],
    ['a patched input and a new builtin', 'import builtins\nbuiltins.input = lambda *a: "patched"\nbuiltins.extra = 1'],
  ])('undoes %s', async (_name, code) => {
    const { client } = session;
    expect((await client.exec(code)).frame.status).toBe('ok');
    expect((await client.request({ op: 'reset' })).frame).toMatchObject({ status: 'ok' });
    expect((await client.exec('print("hi")\ninput()', { stdin: 'typed\n' })).frame).toMatchObject({ status: 'ok', stdout: 'hi\n', result: "'typed'" });
    expect((await client.exec('extra')).frame.error?.ename).toBe('NameError');
  });
});

describe('python kernel whose code closed fds 0, 1 and 2', () => {
  // The kernel's own descriptors (a relay's stream, a socket) must never take those numbers: the
  // next call puts the capture pipes and stdin back on them.
  it.each([
    ['at once', 'import os\nos.close(0)\nos.close(1)\nos.close(2)'],
    ['and the code keeps running', 'import os, time\nos.close(0)\nos.close(1)\nos.close(2)\ntime.sleep(0.5)'],
  ])('keeps serving calls and new relays: %s', async (_name, code) => {
    const { kernel, client, stop } = await startSession('python');
    try {
      const closing = client.exec(code);
      const other = await kernel.connect();
      expect((await closing).frame).toMatchObject({ status: 'ok' });
      for (const c of [client, other, client]) {
        expect((await c.exec('import sys\nprint("out")\nprint("err", file=sys.stderr)\ninput()', { stdin: 'in\n' })).frame).toMatchObject({
          status: 'ok',
          stdout: 'out\n',
          stderr: 'err\n',
          result: "'in'",
        });
        expect((await c.exec('import subprocess\nsubprocess.run(["cat"]).returncode')).frame).toMatchObject({ status: 'ok', result: '0' });
      }
      await other.close();
    } finally {
      await stop();
    }
  });
});

describe('python kernel whose code used up its descriptors', () => {
  // Restoring fds 0-2 takes no new descriptor: the next call runs, and can close the files.
  it('runs the next call, which can close them', async () => {
    const { client, stop } = await startSession('python');
    try {
      const fill = [
        'import resource',
        'soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)',
        'resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))',
        'kept = []',
        'try:',
        '    while True:',
        '        kept.append(open("/dev/null"))',
        'except OSError as err:',
        '    full = err.errno',
        'full',
      ].join('\n');
      expect((await client.exec(fill)).frame).toMatchObject({ status: 'ok', result: '24' });
      const free = 'for f in kept:\n    f.close()\nresource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))\nprint("closed")';
      expect((await client.exec(free)).frame).toMatchObject({ status: 'ok', stdout: 'closed\n' });
      expect((await client.exec('print("after")', { stdin: 'x' })).frame).toMatchObject({ status: 'ok', stdout: 'after\n' });
    } finally {
      await stop();
    }
  });
});

describe('python kernel that cannot interrupt a call', () => {
  it('replies lost and exits when the code ignores the interrupt', async () => {
    const { kernel, client, stop } = await startSession('python');
    try {
      const { frame } = await client.exec('import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint("spinning", flush=True)\nwhile True:\n    pass', {
        timeoutMs: 200,
      });
      expect(frame).toMatchObject({ status: 'lost', stdout: 'spinning\n', error: { ename: 'KernelLost' } });
      expect(await kernel.exited).toBe(3);
      await client.closed;
    } finally {
      await stop();
    }
  }, 20_000);
});
