// Nested tool calls end to end in one process: the real Python kernel (runtime/) and its relay,
// the gateway's real KernelStream, and a ToolBroker over an in-memory upstream.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ToolBroker } from '../../../src/codemode/broker.js';
import { KernelStream } from '../../../src/exec/kernel-stream.js';
import type { KernelResult } from '../../../src/exec/frames.js';
import { Kernel, RUNTIME_DIR } from '../runtime/harness.js';
import { fakeUpstream } from './fake-upstream.js';

interface Gateway {
  kernel: Kernel;
  relay: ChildProcess;
  stream: KernelStream;
}

async function open(language: 'python' | 'bash' | 'node', extra: string[] = []): Promise<Gateway> {
  const kernel = await Kernel.start(language, extra);
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

function exec(g: Gateway, code: string, op: 'exec' | 'run' = 'exec', language = 'python'): Promise<KernelResult> {
  const calls = new ToolBroker(fakeUpstream(), limits).forRun({});
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
