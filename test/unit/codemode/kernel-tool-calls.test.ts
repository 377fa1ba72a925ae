// Nested tool calls end to end in one process: the real Python kernel (runtime/) and its relay,
// the gateway's real KernelStream, and a ToolBroker over an in-memory upstream.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ToolBroker } from '../../../src/codemode/broker.js';
import { KernelStream, type CallHandler } from '../../../src/exec/kernel-stream.js';
import type { KernelResult } from '../../../src/exec/frames.js';
import { Kernel, RUNTIME_DIR } from '../runtime/harness.js';
import { fakeUpstream } from './fake-upstream.js';

interface Gateway {
  kernel: Kernel;
  relay: ChildProcess;
  stream: KernelStream;
}

/** A kernel (`existing`, or a new one with `extra` arguments) and a relay to it, with the gateway's stream. */
async function open(language: 'python' | 'bash' | 'node', extra: string[] = [], existing?: Kernel): Promise<Gateway> {
  const kernel = existing ?? (await Kernel.start(language, extra));
  const relay =
    language === 'node'
      ? spawn(process.execPath, [join(RUNTIME_DIR, 'node/relay.js'), kernel.socket], { stdio: ['pipe', 'pipe', 'inherit'] })
      : spawn('python3', [join(RUNTIME_DIR, 'python/relay.py'), kernel.socket], { stdio: ['pipe', 'pipe', 'inherit'] });
  const stream = new KernelStream(
    (frame) => relay.stdin?.write(frame),
    () => relay.stdin?.end(),
  );
  relay.stdout?.on('data', (c: Buffer) => stream.receive(c));
  return { kernel, relay, stream };
}

const limits = { maxCalls: 5, callTimeoutMs: 1000, resultMaxBytes: 2000, bytesPerRun: 100_000 };

function exec(g: Gateway, code: string, op: 'exec' | 'run' = 'exec', language = 'python', brokerLimits = limits): Promise<KernelResult> {
  const calls = new ToolBroker(fakeUpstream(), brokerLimits).forRun({});
  const req = { code, timeoutMs: 20_000, capChars: 50_000, ...(op === 'run' && { language }) };
  return g.stream.request({ op, ...req }, 'result', 50_000, 30_000, undefined, (f) => calls.handle(f)) as Promise<KernelResult>;
}

describe('tool calls from a python session', () => {
  let g: Gateway;
  beforeAll(async () => {
    g = await open('python');
  });
  afterAll(async () => {
    g.stream.fail('test over');
    await g.kernel.stop();
  });

  it.each([
    ['a sync call, JSON parsed from text', 'from codemode import mcp\nmcp.demo.get_sum(a=2, b=3)', '5'],
    ['a text result', 'from codemode import call_tool\ncall_tool("demo", "echo", {"message": "hi"})', "'Echo: hi'"],
    ['await, in parallel', 'import asyncio\nfrom codemode import mcp\nawait asyncio.gather(*(mcp.demo.get_sum(a=i, b=1) for i in range(3)))', '[1, 2, 3]'],
    ['structured content', 'from codemode import mcp\nmcp["demo"]["rows"](n=2)["rows"][1]', "{'i': 1, 'name': 'row 1'}"],
    ['servers()', 'from codemode import servers\n[s["name"] for s in servers()]', "['demo', 'other']"],
    ['search() ranks names first', 'from codemode import search\nsearch("sum numbers", limit=1)[0]["tool"]', "'get-sum'"],
    ['describe() at detail "summary"', 'from codemode import describe\ndescribe("demo", "echo", detail="summary")["signature"]', "'echo(message: string)'"],
  ])('%s', async (_name, code, expected) => {
    const r = await exec(g, code);
    expect(r.error?.evalue ?? '').toBe('');
    expect(r.result).toBe(expected);
  });

  it.each([
    ['a tool error', 'mcp.demo.fail()', 'tool it broke'],
    ['an unknown tool', 'mcp.demo.nope()', 'denied server "demo" has no tool "nope"'],
    ['an unknown server', 'mcp.elsewhere.echo(message="x")', 'denied server "elsewhere" is not available'],
    ['a missing argument (checked in the sandbox)', 'mcp.demo.echo()', 'invalid demo.echo: missing required argument "message"'],
    ['a wrong type (checked in the sandbox)', 'mcp.demo.get_sum(a="1", b=2)', 'invalid demo.get-sum: argument "a" must be number, not string'],
    ['a per-call timeout', 'mcp.demo.slow(ms=5000)', 'timeout demo.slow did not answer within 1000 ms'],
  ])('raises ToolError for %s', async (_name, call, expected) => {
    const code = `from codemode import mcp, ToolError\ntry:\n    ${call}\nexcept ToolError as e:\n    r = e.kind + " " + str(e)\nr`;
    const r = await exec(g, code);
    expect(r.status).toBe('ok');
    expect(r.result?.slice(1, -1)).toContain(expected);
  });

  it('cuts a large result structurally and says so first', async () => {
    const r = await exec(g, 'from codemode import mcp\nv = mcp.demo.rows(n=500)\n(list(v)[0], v["total"], len(v["rows"]) < 500)');
    expect(r.result).toMatch(/^\('_cut', 500, True\)$/);
    expect(r.stderr).toContain('codemode: demo.rows: result cut from');
  });

  it('stops at the per-run call limit', async () => {
    const r = await exec(
      g,
      'from codemode import mcp, ToolError\nn = 0\ntry:\n    while True:\n        mcp.demo.echo(message="x"); n += 1\nexcept ToolError as e:\n    k = (n, e.kind)\nk',
    );
    expect(r.result).toBe("(5, 'limit')");
  });

  it('interrupts a cell waiting on a tool at its timeout, and keeps the session', async () => {
    const calls = new ToolBroker(fakeUpstream(), { ...limits, callTimeoutMs: 10_000 }).forRun({});
    const code = 'from codemode import mcp\nmcp.demo.slow(ms=8000)';
    const r = (await g.stream.request({ op: 'exec', code, timeoutMs: 300, capChars: 1000 }, 'result', 1000, 20_000, undefined, (f) =>
      calls.handle(f),
    )) as KernelResult;
    calls.close();
    expect(r.status).toBe('timeout');
    expect((await exec(g, 'from codemode import mcp\nmcp.demo.get_sum(a=1, b=1)')).result).toBe('2');
  });

  // A thread keeps its connection to the kernel between requests (runtime/sdk/python/codemode).
  // Each row would read another request's answer if that connection were shared or reused blindly.
  it.each([
    [
      'a request interrupted while it waits: its late answer never reaches the next one',
      [
        'import signal, time',
        'from codemode import mcp',
        'class Stop(Exception): pass',
        'def stop(*_): raise Stop()',
        'signal.signal(signal.SIGALRM, stop)',
        'signal.setitimer(signal.ITIMER_REAL, 0.2)',
        'try:',
        '    mcp.demo.slow(ms=500)',
        'except Stop:',
        '    pass',
        'signal.signal(signal.SIGALRM, signal.SIG_DFL)',
        'time.sleep(0.8)',
        'mcp.demo.get_sum(a=2, b=3)',
      ],
      '5',
    ],
    [
      'a signal handler calling a tool while the thread waits on one',
      [
        'import signal',
        'from codemode import mcp',
        'inner = []',
        // The outer answer comes while the handler waits for its own.
        'signal.signal(signal.SIGALRM, lambda *_: inner.append(mcp.demo.slow(ms=500)))',
        'signal.setitimer(signal.ITIMER_REAL, 0.1)',
        'outer = mcp.demo.slow(ms=300)',
        'signal.signal(signal.SIGALRM, signal.SIG_DFL)',
        '(outer, inner)',
      ],
      "('done', ['done'])",
    ],
    [
      'a forked child calling while its parent does',
      [
        'import os, time',
        'from codemode import mcp',
        'mcp.demo.get_sum(a=1, b=1)',
        'pid = os.fork()',
        // The child's answer comes while the parent waits for its own.
        'if pid == 0:',
        '    time.sleep(0.2)',
        '    os._exit(0 if mcp.demo.get_sum(a=2, b=3) == 5 else 1)',
        'parent = mcp.demo.slow(ms=600)',
        // Python 3.8 has no os.waitstatus_to_exitcode: a child killed by a signal reads -1.
        'status = os.waitpid(pid, 0)[1]',
        '(parent, os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1)',
      ],
      "('done', 0)",
    ],
  ])('answers each request with its own answer: %s', async (_name, lines, expected) => {
    const r = await exec(g, lines.join('\n'));
    expect(r.error?.evalue ?? '').toBe('');
    expect(r.result).toBe(expected);
  });

  it('leaves no connection behind when the threads that made parallel calls end', async () => {
    const calls = [
      'import threading',
      'from codemode import mcp',
      'ts = [threading.Thread(target=mcp.demo.get_sum, kwargs={"a": i, "b": 1}) for i in range(4)]',
      '[t.start() for t in ts] and [t.join() for t in ts]',
    ].join('\n');
    const live = 'import threading\nsum(t.name == "codemode-tool" for t in threading.enumerate())';
    await exec(g, calls);
    const after = async (): Promise<string | undefined> => (await exec(g, `import time\ntime.sleep(0.3)\n${live}`)).result;
    const first = await after();
    for (let i = 0; i < 3; i++) await exec(g, calls);
    // A connection held after its thread ended would keep a kernel thread each: 4 more per call.
    expect(await after()).toBe(first);
  });

  it('answers a call while another client of the code leaves its large answers unread', async () => {
    // Eight results of ~600 KB on one connection the code never reads: far past a UNIX socket's
    // buffer. Delivered on the reader thread, the first would block it, and with it every frame
    // of the stream, so the next call's answer would never reach its code (the exec would time out).
    const code = [
      'import os, socket, codemode',
      'from codemode import mcp',
      'hog = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)',
      'hog.connect(os.environ["CODEMODE_TOOLS_SOCKET"])',
      'for i in range(8):',
      '    hog.sendall(codemode._encode({"callId": "h%d" % i, "op": "call", "server": "demo", "tool": "rows", "args": {"n": 20000}}))',
      'import time',
      'time.sleep(1)',
      'r = mcp.demo.get_sum(a=2, b=3)',
      'hog.close()',
      'r',
    ].join('\n');
    const big = { maxCalls: 20, callTimeoutMs: 5000, resultMaxBytes: 1_000_000, bytesPerRun: 20_000_000 };
    const r = await exec(g, code, 'exec', 'python', big);
    expect(r.error?.evalue ?? '').toBe('');
    expect(r.result).toBe('5');
  });

  it('keeps a tool result in a variable across calls', async () => {
    await exec(g, 'from codemode import mcp\nkept = mcp.demo.get_sum(a=40, b=2)');
    expect((await exec(g, 'kept')).result).toBe('42');
  });

  it('answers "unavailable" when the gateway has no broker for the call', async () => {
    const r = (await g.stream.request(
      {
        op: 'exec',
        code: 'from codemode import mcp, ToolError\ntry:\n    mcp.demo.echo(message="x")\nexcept ToolError as e:\n    r = e.kind\nr',
        timeoutMs: 10_000,
        capChars: 1000,
      },
      'result',
      1000,
      20_000,
    )) as KernelResult;
    expect(r.result).toBe("'unavailable'");
  });
});

describe('tool calls from a node session', () => {
  let g: Gateway;
  beforeAll(async () => {
    g = await open('node');
  });
  afterAll(async () => {
    g.stream.fail('test over');
    await g.kernel.stop();
  });

  it.each([
    ['a call, JSON parsed from text', "const { mcp } = require('codemode');\nawait mcp.demo.get_sum({ a: 2, b: 3 })", '5'],
    ['in parallel', "const { callTool } = require('codemode');\nawait Promise.all([1, 2].map((a) => callTool('demo', 'get-sum', { a, b: 1 })))", '[ 2, 3 ]'],
    [
      'a tool error',
      "const { mcp, ToolError } = require('codemode');\nawait mcp.demo.fail().catch((e) => `${e instanceof ToolError} ${e.kind} ${e.message}`)",
      "'true tool it broke'",
    ],
    [
      'a missing argument',
      "const { mcp } = require('codemode');\nawait mcp.demo.echo({}).catch((e) => e.kind + ': ' + e.message)",
      `'invalid: demo.echo: missing required argument "message"'`,
    ],
    ['search', "const { search } = require('codemode');\n(await search('sum numbers', { limit: 1 }))[0].tool", "'get-sum'"],
    // The module keeps one connection to the kernel for the process (runtime/sdk/node/codemode.js).
    [
      'in parallel, answered out of order',
      "const { mcp } = require('codemode');\nawait Promise.all([mcp.demo.slow({ ms: 300 }), mcp.demo.get_sum({ a: 2, b: 3 })])",
      "[ 'done', 5 ]",
    ],
    [
      'one connection for calls one after another',
      [
        "const net = require('node:net');",
        "const { mcp } = require('codemode');",
        'await mcp.demo.get_sum({ a: 1, b: 1 });',
        'const connect = net.connect;',
        'let opened = 0;',
        'net.connect = (...args) => (opened++, connect(...args));',
        'try { for (let i = 0; i < 3; i++) await mcp.demo.get_sum({ a: i, b: 1 }); } finally { net.connect = connect; }',
        'opened',
      ].join('\n'),
      '0',
    ],
    [
      'a request too large for the kernel fails alone, not the one beside it',
      "const { mcp, callTool } = require('codemode');\nawait Promise.all([mcp.demo.slow({ ms: 300 }), callTool('demo', 'echo', { message: 'x'.repeat(2 ** 21) }).catch((e) => e.kind)])",
      "[ 'done', 'invalid' ]",
    ],
    [
      'a new connection after the kernel closed the kept one',
      [
        "const net = require('node:net');",
        "const { mcp } = require('codemode');",
        'await mcp.demo.get_sum({ a: 1, b: 1 });',
        // The kernel's end of every tools.sock connection (the kernel runs this cell in its own process).
        'for (const h of process._getActiveHandles()) if (h instanceof net.Socket && h.server?.address() === process.env.CODEMODE_TOOLS_SOCKET) h.destroy();',
        'await new Promise((r) => setTimeout(r, 100));',
        'await mcp.demo.get_sum({ a: 2, b: 3 })',
      ].join('\n'),
      '5',
    ],
  ])('%s', async (_name, code, expected) => {
    const r = await exec(g, code);
    expect(r.error?.evalue ?? '').toBe('');
    expect(r.result).toBe(expected);
  });
});

describe('tool calls from programs the kernel starts', () => {
  it('works in a warm run (op "run") and from bash (python3 -m codemode)', async () => {
    const py = await open('python', ['--prestart']);
    const bash = await open('bash');
    try {
      const run = await exec(py, 'from codemode import mcp\nprint(mcp.demo.get_sum(a=1, b=2))', 'run');
      expect(run.stdout).toBe('3\n');
      const node = await exec(py, "const { mcp } = require('codemode');\nmcp.demo.echo({ message: 'js' }).then(console.log)", 'run', 'node');
      expect(node.stdout).toBe('Echo: js\n');
      // The kept connection to the kernel does not hold the program open once nothing waits on it.
      expect(node.status).toBe('ok');
      const sh = await exec(bash, 'python3 -m codemode call demo echo message=hello; python3 -m codemode call demo fail; echo "exit $?"');
      expect(sh.stdout).toBe('Echo: hello\nexit 1\n');
      expect(sh.stderr).toContain('ToolError (tool): it broke');
    } finally {
      py.stream.fail('test over');
      bash.stream.fail('test over');
      await Promise.all([py.kernel.stop(), bash.kernel.stop()]);
    }
  });
});

/** The Python code of the rows below: the same in a session call and in a warm run. */
const PYTHON_CODE = {
  lost: 'from codemode import mcp, ToolError\nfirst = mcp.demo.get_sum(a=1, b=1)\ntry:\n    mcp.demo.slow(ms=3000)\n    lost = "answered"\nexcept ToolError as e:\n    lost = e.kind\nprint(first, lost, mcp.demo.get_sum(a=2, b=2))',
  held: 'import time\nfrom codemode import mcp\nprint(mcp.demo.get_sum(a=1, b=1), flush=True)\ntime.sleep(1.5)\nprint(mcp.demo.get_sum(a=2, b=2))',
  early: (mark: string) =>
    `from codemode import mcp, ToolError\nmcp.demo.get_sum(a=1, b=1)\ntry:\n    mcp.demo.slow(ms=3000)\n    lost = 'answered'\nexcept ToolError as e:\n    lost = e.kind\nopen(${JSON.stringify(mark)}, 'w').write(lost)`,
  orphan:
    'import time\nfrom codemode import mcp, ToolError\ndef kind(f):\n    try:\n        f()\n        return "answered"\n    except ToolError as e:\n        return e.kind + (" not called" if "not called" in str(e) else "")\nprint(mcp.demo.get_sum(a=1, b=1), flush=True)\ntime.sleep(1.5)\nprint(kind(lambda: mcp.demo.get_sum(a=2, b=2)), kind(lambda: mcp.demo.get_sum(a=3, b=3)))',
  abandoned: (mark: string) =>
    `import time\nfrom codemode import mcp, ToolError\ndef kind(f):\n    try:\n        f()\n        return "answered"\n    except ToolError as e:\n        return e.kind + (" not called" if "not called" in str(e) else "")\nprint(mcp.demo.get_sum(a=1, b=1), flush=True)\ntime.sleep(1.5)\nr = kind(lambda: mcp.demo.get_sum(a=2, b=2)) + " " + kind(lambda: mcp.demo.get_sum(a=3, b=3))\nopen(${JSON.stringify(mark)}, "w").write(r)`,
};

// A call's exec stream can break while its code runs (an API server or kubelet restart): the
// gateway recalls the call over a new stream with "tools" (runtime/PROTOCOL.md, "Recall"), and
// the code's tool calls go on over that stream, with the same broker (its limits carry on).
describe.each([
  {
    name: 'a python session call',
    language: 'python' as const,
    args: [] as string[],
    op: 'exec' as const,
    ...PYTHON_CODE,
  },
  {
    name: 'a python warm run',
    language: 'python' as const,
    args: ['--prestart'],
    op: 'run' as const,
    ...PYTHON_CODE,
  },
  {
    name: 'a node session call',
    language: 'node' as const,
    args: [] as string[],
    op: 'exec' as const,
    lost: "const { mcp } = require('codemode');\nconst first = await mcp.demo.get_sum({ a: 1, b: 1 });\nlet lost = 'answered';\ntry { await mcp.demo.slow({ ms: 3000 }); } catch (e) { lost = e.kind; }\nconsole.log(first, lost, await mcp.demo.get_sum({ a: 2, b: 2 }));",
    held: "const { mcp } = require('codemode');\nconsole.log(await mcp.demo.get_sum({ a: 1, b: 1 }));\nawait new Promise((r) => setTimeout(r, 1500));\nconsole.log(await mcp.demo.get_sum({ a: 2, b: 2 }));",
    early: (mark: string) =>
      `const { mcp } = require('codemode');\nawait mcp.demo.get_sum({ a: 1, b: 1 });\nlet lost = 'answered';\ntry { await mcp.demo.slow({ ms: 3000 }); } catch (e) { lost = e.kind; }\nrequire('node:fs').writeFileSync(${JSON.stringify(mark)}, lost);`,
    orphan:
      "const { mcp } = require('codemode');\nconst kind = async (f) => { try { await f(); return 'answered'; } catch (e) { return e.kind + (e.message.includes('not called') ? ' not called' : ''); } };\nconsole.log(await mcp.demo.get_sum({ a: 1, b: 1 }));\nawait new Promise((r) => setTimeout(r, 1500));\nconsole.log(await kind(() => mcp.demo.get_sum({ a: 2, b: 2 })), await kind(() => mcp.demo.get_sum({ a: 3, b: 3 })));",
    abandoned: (mark: string) =>
      `const { mcp } = require('codemode');\nconst kind = async (f) => { try { await f(); return 'answered'; } catch (e) { return e.kind + (e.message.includes('not called') ? ' not called' : ''); } };\nconsole.log(await mcp.demo.get_sum({ a: 1, b: 1 }));\nawait new Promise((r) => setTimeout(r, 1500));\nconst r = (await kind(() => mcp.demo.get_sum({ a: 2, b: 2 }))) + ' ' + (await kind(() => mcp.demo.get_sum({ a: 3, b: 3 })));\nrequire('node:fs').writeFileSync(${JSON.stringify(mark)}, r);`,
  },
])('tool calls of $name after its stream broke', ({ language, args, op, lost, held, early, orphan, abandoned }) => {
  let g: Gateway | undefined;
  let again: Gateway | undefined;
  afterEach(async () => {
    again?.stream.fail('test over');
    g?.stream.fail('test over');
    await g?.kernel.stop();
    g = again = undefined;
  });

  /** Sends `code` with a key, its tool calls to `handle`, its output to `onOutput`. */
  function send(gw: Gateway, code: string, handle: CallHandler, onOutput?: (stream: string, text: string) => void): Promise<unknown> {
    const req = { op, code, key: 'call-t', timeoutMs: 20_000, capChars: 50_000, ...(op === 'run' && { language }) };
    const sent = gw.stream.request(req, 'result', 50_000, 30_000, onOutput, handle);
    sent.catch(() => undefined);
    return sent;
  }

  /** A second relay to the same kernel, as a replica's new exec stream after the break. */
  async function reconnect(gw: Gateway): Promise<Gateway> {
    const other = await open(language, [], gw.kernel);
    again = other;
    return other;
  }

  const recall = (gw: Gateway, handle: CallHandler): Promise<KernelResult> =>
    gw.stream.request({ op: 'recall', key: 'call-t', tools: true }, 'result', 50_000, 30_000, undefined, handle) as Promise<KernelResult>;
  /** A recall as a replica with no broker for the call makes it (one that took over a stopped replica's run). */
  const recallWithoutTools = (gw: Gateway): Promise<KernelResult> =>
    gw.stream.request({ op: 'recall', key: 'call-t' }, 'result', 50_000, 30_000) as Promise<KernelResult>;

  /**
   * A new kernel running `code`, its tool calls made by a fresh broker, once the code printed its
   * first call's answer (that answer is in; its next call comes later).
   */
  async function started(
    code: string,
    extra: string[] = [],
  ): Promise<{ gw: Gateway; upstream: ReturnType<typeof fakeUpstream>; handle: CallHandler; result: Promise<unknown> }> {
    const gw = await open(language, [...args, ...extra]);
    g = gw;
    const upstream = fakeUpstream();
    const calls = new ToolBroker(upstream, limits).forRun({});
    const handle: CallHandler = (f) => calls.handle(f);
    let printed!: () => void;
    const first = new Promise<void>((r) => (printed = r));
    const result = send(gw, code, handle, (_stream, text) => text.includes('2') && printed());
    await first;
    return { gw, upstream, handle, result };
  }

  /** Another call to the kernel (not a recall), as another replica's: answered busy while the first runs. */
  const another = (gw: Gateway, key: string): Promise<KernelResult & { busy?: boolean }> =>
    gw.stream.request(
      { op, code: '1', key, timeoutMs: 5_000, capChars: 1000, ...(op === 'run' && { language }) },
      'result',
      1000,
      10_000,
    ) as Promise<KernelResult>;

  it('go on over the stream that recalls the call; one on its way at the break fails as unknown', async () => {
    g = await open(language, args);
    const upstream = fakeUpstream();
    const calls = new ToolBroker(upstream, { ...limits, callTimeoutMs: 10_000 }).forRun({});
    let slowOut!: () => void;
    const slow = new Promise<void>((r) => (slowOut = r));
    const handle: CallHandler = (f) => {
      if (f.op === 'call' && f.tool === 'slow') slowOut();
      return calls.handle(f);
    };
    void send(g, lost, handle);
    await slow;
    g.stream.fail('the exec stream broke');
    const r = await recall(await reconnect(g), handle);
    expect(r.error?.evalue ?? '').toBe('');
    expect(r.status).toBe('ok');
    expect(r.stdout).toBe('2 unavailable 4\n');
    expect(upstream.calls).toEqual(['demo.get-sum', 'demo.slow', 'demo.get-sum']);
  });

  it('holds a call made while no stream could take it, and sends it over the stream that recalls the call', { timeout: 30_000 }, async () => {
    const { gw, upstream, handle } = await started(held);
    gw.stream.fail('the exec stream broke');
    // The code's second call comes while no stream is there: it waits in the kernel.
    await new Promise((r) => setTimeout(r, 2_500));
    expect(upstream.calls).toEqual(['demo.get-sum']);
    const r = await recall(await reconnect(gw), handle);
    expect(r.error?.evalue ?? '').toBe('');
    expect(r.stdout).toBe('2\n4\n');
    expect(upstream.calls).toEqual(['demo.get-sum', 'demo.get-sum']);
  });

  it('fails a call on its way at the break as unknown when the stream ends, before any recall', { timeout: 30_000 }, async () => {
    g = await open(language, args);
    const calls = new ToolBroker(fakeUpstream(), { ...limits, callTimeoutMs: 10_000 }).forRun({});
    let slowOut!: () => void;
    const slow = new Promise<void>((r) => (slowOut = r));
    const handle: CallHandler = (f) => {
      if (f.op === 'call' && f.tool === 'slow') slowOut();
      return calls.handle(f);
    };
    const mark = join(await mkdtemp(join(tmpdir(), 'tool-calls-')), 'mark');
    void send(g, early(mark), handle);
    await slow;
    g.stream.fail('the exec stream broke');
    // No stream recalls the call: only the end of its stream can answer the code (the slow tool's
    // own answer went to the dead stream), which it does long before the code's 20 s timeout.
    await vi.waitFor(() => expect(readFileSync(mark, 'utf8')).toBe('unavailable'), { timeout: 15_000, interval: 50 });
    const r = await recallWithoutTools(await reconnect(g));
    expect(r.status).toBe('ok');
  });

  it('fails held and later calls at once, as not called, when a replica without a broker recalls the call', { timeout: 30_000 }, async () => {
    const { gw, upstream } = await started(orphan);
    gw.stream.fail('the exec stream broke');
    // The code's second call comes while no stream is there: it waits in the kernel until a
    // recall says no gateway will make it; its third comes after and is answered at once.
    await new Promise((r) => setTimeout(r, 2_500));
    const r = await recallWithoutTools(await reconnect(gw));
    expect(r.error?.evalue ?? '').toBe('');
    expect(r.status).toBe('ok');
    expect(r.stdout).toBe('2\nunavailable not called unavailable not called\n');
    expect(upstream.calls).toEqual(['demo.get-sum']);
  });

  it('fails held and later calls, as not called, when another call finds the kernel busy; the kernel is then free', { timeout: 30_000 }, async () => {
    const { gw, upstream } = await started(orphan);
    gw.stream.fail('the exec stream broke');
    // Its replica stopped: no gateway recalls the call. Its second tool call waits in the kernel
    // until another replica's call comes and is answered busy.
    await new Promise((r) => setTimeout(r, 2_500));
    const other = await reconnect(gw);
    expect((await another(other, 'call-u')).busy).toBe(true);
    // The code ends on its own, long before its 20 s timeout, and the next call runs.
    let n = 0;
    await vi.waitFor(async () => expect(await another(other, `call-v${n++}`)).toMatchObject({ status: 'ok' }), { timeout: 10_000, interval: 100 });
    const r = await recallWithoutTools(other);
    expect(r.error?.evalue ?? '').toBe('');
    expect(r.stdout).toBe('2\nunavailable not called unavailable not called\n');
    expect(upstream.calls).toEqual(['demo.get-sum']);
  });

  it('fails held and later calls, as not called, once no stream took the call over within the grace', { timeout: 30_000 }, async () => {
    const mark = join(await mkdtemp(join(tmpdir(), 'tool-calls-')), 'mark');
    const { gw, upstream } = await started(abandoned(mark), ['--held-grace-ms', '4000']);
    gw.stream.fail('the exec stream broke');
    // Its replica stopped and nobody calls the session: no recall, no other call. The code's second
    // tool call (1.5 s in) waits in the kernel for its gateway for the grace (4 s from the break)...
    await new Promise((r) => setTimeout(r, 2_500));
    expect(existsSync(mark)).toBe(false);
    // ...then it and the third are answered "not called", and the code ends on its own, long
    // before its 20 s timeout.
    await vi.waitFor(() => expect(readFileSync(mark, 'utf8')).toBe('unavailable not called unavailable not called'), { timeout: 15_000, interval: 50 });
    expect(upstream.calls).toEqual(['demo.get-sum']);
    const r = await recallWithoutTools(await reconnect(gw));
    expect(r.status).toBe('ok');
  });

  it("leaves a call's tool calls alone when another call finds the kernel busy while the call's stream is alive", { timeout: 30_000 }, async () => {
    const { gw, upstream, result } = await started(held);
    expect((await another(await reconnect(gw), 'call-u')).busy).toBe(true);
    expect(await result).toMatchObject({ status: 'ok', stdout: '2\n4\n' });
    expect(upstream.calls).toEqual(['demo.get-sum', 'demo.get-sum']);
  });
});
