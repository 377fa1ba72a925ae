// Code mode end to end: sandbox code in a real session pod calls tools of a REAL upstream MCP
// server (the reference "everything" server, over Streamable HTTP) through the gateway's broker,
// over the kernel's exec stream. Policy, limits, cuts and the counts in the result.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, SANDBOXRUN_PLURAL, VERSION, type SandboxRun } from '../../src/api/v1alpha1/index.js';
import { createNamespace, deleteNamespace, readyPoolPods, testKube, until } from './helpers/kube.js';
import { startEverything, type Everything } from './helpers/everything.js';
import { connect, startOperator, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';

const k = testKube();
let ns = '';
let op: RunningOperator;
let mcp: TestClient;
let everything: Everything;
let session = '';

beforeAll(async () => {
  ns = await createNamespace(k, 'codemode-calls');
  everything = await startEverything();
  op = await startOperator(
    ns,
    // One warm pod: a transient run served from the pool reaches tools through its kernel too.
    { CODEMODE_TOOL_CALLS_PER_RUN: '4', CODEMODE_TOOL_CALL_TIMEOUT_SECONDS: '2', CODEMODE_TOOL_RESULT_MAX_BYTES: '4096', CODEMODE_WARM_POOL_SIZE: '1' },
    { upstreams: everything.caller, metrics: true },
  );
  mcp = await connect(op.url, 'current');
  const r = await mcp.callTool('create_session', { language: 'python' });
  expect(r.isError ?? false, JSON.stringify(r.content)).toBe(false);
  session = String(r.structuredContent?.session);
});
afterAll(async () => {
  await mcp?.close();
  await op?.stop();
  await everything?.stop();
  await deleteNamespace(k, ns);
});

const sc = (r: ToolResult): Record<string, unknown> => r.structuredContent ?? {};
const run = (code: string, extra: Record<string, unknown> = {}): Promise<ToolResult> =>
  mcp.callTool('execute_code', { code, session, timeout_seconds: 60, ...extra });

/** Runs `call` in the session and returns "<kind>: <message>" of the ToolError it raised. */
async function toolError(call: string, extra: Record<string, unknown> = {}): Promise<string> {
  const r = await run(
    `from codemode import mcp, ToolError\ntry:\n    ${call}\n    e = None\nexcept ToolError as err:\n    e = err.kind + ": " + str(err)\ne`,
    extra,
  );
  expect(sc(r).phase, JSON.stringify(r.content)).toBe('Succeeded');
  return String(sc(r).result);
}

let warmRun = '';

describe('code mode against the everything server', () => {
  it('discovers, calls and unwraps results; counts the calls in the result', async () => {
    const r = await run(
      'from codemode import mcp, search, describe, servers\n' +
        'names = [s["name"] for s in servers()]\n' +
        'hit = search("sum of two numbers", limit=3)[0]\n' +
        'schema = describe("everything", hit["tool"])["inputSchema"]\n' +
        'echo = mcp.everything.echo(message="hello")\n' +
        'weather = mcp.everything.get_structured_content(location="New York")\n' +
        '(names, hit["tool"], sorted(schema["required"]), echo, sorted(weather))',
    );
    expect(sc(r).phase, JSON.stringify(r.content)).toBe('Succeeded');
    expect(sc(r).result).toBe("(['everything'], 'get-sum', ['a', 'b'], 'Echo: hello', ['conditions', 'humidity', 'temperature'])");
    expect(sc(r).tool_calls).toMatchObject({ calls: 2, errors: 0, servers: { everything: { calls: 2, errors: 0 } } });
  });

  it("raises ToolError with the upstream's message for a tool error", async () => {
    expect(await toolError('mcp.everything.get_resource_reference(resourceId=1.5)')).toBe(
      "'tool: Invalid resourceId: 1.5. Must be a finite positive integer.'",
    );
  });

  it.each([
    ['an unknown tool', 'mcp.everything.no_such_tool()', {}, /^'denied: server "everything" has no tool "no_such_tool"/],
    [
      'a server the program may not call (servers: [])',
      'mcp.everything.echo(message="x")',
      { servers: [] },
      /^'denied: server "everything" is not available to this program/,
    ],
    ['a missing argument, before the call leaves the sandbox', 'mcp.everything.echo()', {}, /^'invalid: everything.echo: missing required argument "message"'/],
  ])('refuses %s', async (_name, call, extra, expected) => {
    const before = everything.reached.length;
    expect(await toolError(call, extra)).toMatch(expected);
    expect(everything.reached.length).toBe(before);
  });

  it('records a Warning Event on the session for a denied call', async () => {
    await until(
      async () =>
        (await k.core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${session}` })).items.some(
          (e) => e.reason === 'ToolCallDenied' && e.type === 'Warning' && /no tool "no_such_tool"/.test(e.message ?? ''),
        ),
      30_000,
      'the ToolCallDenied Event',
    );
  });

  it('refuses servers the caller cannot use before running anything', async () => {
    const r = await run('print(1)', { servers: ['nope'] });
    expect(r.isError).toBe(true);
    expect(r.content[0]?.text).toMatch(/Unknown or unavailable upstream servers: nope/);
  });

  it('stops a run at the per-run call limit', async () => {
    const r = await run(
      'from codemode import mcp, ToolError\nn = 0\ntry:\n    for i in range(10):\n        mcp.everything.echo(message=str(i)); n += 1\nexcept ToolError as e:\n    k = e.kind\n(n, k)',
    );
    expect(sc(r).result).toBe("(4, 'limit')");
    expect(sc(r).tool_calls).toMatchObject({ calls: 5, errors: 1 });
  });

  it('times out a slow tool call, and counts the wait', async () => {
    const r = await run(
      'from codemode import mcp, ToolError\ntry:\n    mcp.everything.trigger_long_running_operation(duration=20, steps=2)\nexcept ToolError as e:\n    k = e.kind\nk',
    );
    expect(sc(r).result).toBe("'timeout'");
    expect(Number((sc(r).tool_calls as { upstream_wait_ms: number }).upstream_wait_ms)).toBeGreaterThanOrEqual(1900);
  });

  it('cuts a large result to the same shape and says so', async () => {
    const r = await run('from codemode import mcp\nv = mcp.everything.echo(message="x" * 20000)\n(type(v).__name__, len(v) < 4096, v.endswith("…"))');
    expect(sc(r).result).toBe("('str', True, True)");
    expect(String(sc(r).stderr)).toMatch(/codemode: everything.echo: result cut from \d+ to \d+ bytes \(limit 4096\)/);
  });

  it('keeps a tool result in a variable across calls, with await', async () => {
    await run('import asyncio\nfrom codemode import mcp\nsums = await asyncio.gather(*(mcp.everything.get_sum(a=i, b=1) for i in range(3)))');
    const r = await run('sums');
    expect(sc(r).result).toBe("['The sum of 0 and 1 is 1.', 'The sum of 1 and 1 is 2.', 'The sum of 2 and 1 is 3.']");
  });

  it('reaches tools from a transient run in a warm pool pod', async () => {
    await until(async () => (await readyPoolPods(k, ns)).length > 0, 120_000, 'a ready warm pod');
    const r = await mcp.callTool('execute_code', {
      code: 'import socket\nfrom codemode import mcp\nprint(socket.gethostname().startswith("codemode-pool-"), mcp.everything.echo(message="warm"))',
      servers: ['everything'],
      timeout_seconds: 60,
    });
    expect(sc(r).phase, JSON.stringify(r.content)).toBe('Succeeded');
    expect(sc(r).stdout).toBe('True Echo: warm\n');
    expect(sc(r).tool_calls).toMatchObject({ calls: 1, errors: 0 });
    warmRun = String(sc(r).run);
  });

  it("keeps the counts in the run's status and in a session call's audit record", async () => {
    const runs = async (): Promise<SandboxRun[]> =>
      ((await k.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL })) as { items: SandboxRun[] })
        .items;
    const expected = { calls: 1, errors: 0, servers: [{ name: 'everything', calls: 1, errors: 0 }] };
    // The final status is written after the reply.
    await until(
      async () => (await runs()).some((r) => r.metadata.name === warmRun && r.status?.toolCalls !== undefined),
      30_000,
      'the warm run status with toolCalls',
    );
    expect((await runs()).find((r) => r.metadata.name === warmRun)?.status?.toolCalls).toMatchObject(expected);
    // The session calls above made tool calls: their audit records (spec.session) count them too.
    await until(
      async () => (await runs()).some((r) => r.spec.session !== undefined && (r.status?.toolCalls?.calls ?? 0) > 0),
      30_000,
      'an audit record with toolCalls',
    );
    const records = (await runs()).filter((r) => r.spec.session !== undefined && r.status?.toolCalls !== undefined);
    for (const r of records) expect(r.status?.toolCalls?.calls).toBeGreaterThan(0);
    expect(JSON.stringify(records.map((r) => r.status))).not.toMatch(/Echo:/);
  });

  it('stays up when the program garbles and floods the tools socket, and the session calls tools afterwards', async () => {
    // Hostile input on the code-mode channel: what sandbox code writes to tools.sock reaches the
    // kernel and, framed, the gateway. Malformed headers, a huge declared length, a frame over the
    // bound, a call over the gateway's 1 MiB call bound, then 300 well-framed requests of no op.
    const flood = await run(
      [
        'import json, os, socket',
        'path = os.environ["CODEMODE_TOOLS_SOCKET"]',
        'def send(data):',
        '    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)',
        '    s.settimeout(10)',
        '    try:',
        '        s.connect(path); s.sendall(data); s.shutdown(socket.SHUT_WR)',
        '        out = b""',
        '        while len(out) < 100000:',
        '            c = s.recv(65536)',
        '            if not c: break',
        '            out += c',
        '        return out',
        '    except OSError:',
        '        return b"closed"',
        '    finally:',
        '        s.close()',
        'def framed(obj):',
        '    b = json.dumps(obj).encode()',
        '    return b"%d\\n%s" % (len(b), b)',
        'answers = [send(b"not a frame\\n"), send(b"99999999999999999999\\n"), send(b"%d\\n%s" % (2 << 20, b"x" * (2 << 20)))]',
        'answers.append(send(framed({"op": "call", "server": "everything", "tool": "echo", "args": {"message": "x" * (1 << 20)}, "callId": "big"})))',
        'answers += [send(framed({"op": "nope", "callId": "k%d" % i})) for i in range(300)]',
        'len(answers)',
      ].join('\n'),
    );
    // Every send got an answer or a closed connection: nothing hung.
    expect(sc(flood).phase, JSON.stringify(flood.content)).toBe('Succeeded');
    expect(sc(flood).result).toBe('304');
    // The gateway, the session and its tools still work.
    const after = await run('from codemode import mcp\nmcp.everything.echo(message="still here")');
    expect(sc(after).phase, JSON.stringify(after.content)).toBe('Succeeded');
    expect(sc(after).result).toBe("'Echo: still here'");
    expect((await fetch(new URL('/healthz', op.url))).status).toBe(200);
  }, 180_000);

  it('counts calls in codemode_upstream_calls_total by server and outcome', async () => {
    const text = await op.metrics?.registry.metrics();
    expect(text).toMatch(/codemode_upstream_calls_total\{server="everything",outcome="ok"\} [1-9]/);
    expect(text).toMatch(/codemode_upstream_calls_total\{server="everything",outcome="timeout"\} [1-9]/);
    expect(text).toMatch(/codemode_upstream_calls_total\{server="",outcome="denied"\} [1-9]/);
  });
});
