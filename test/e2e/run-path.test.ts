// The core path end to end: MCP execute_code → SandboxRun → hardened pod → exec → result, with
// real MCP clients of both protocol eras against an operator running on the real test cluster.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { GROUP, SANDBOXRUN_PLURAL, VERSION } from '../../src/api/v1alpha1/index.js';
import { createNamespace, deleteNamespace, readyPoolPods, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type Era, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';

const k = testKube();
let ns = '';
let op: RunningOperator;
const clients: Partial<Record<Era, TestClient>> = {};

beforeAll(async () => {
  ns = await createNamespace(k, 'run-path');
  op = await startOperator(ns, { CODEMODE_OUTPUT_CAP_CHARS: '20000', CODEMODE_MAX_TIMEOUT_SECONDS: '60', CODEMODE_PROGRESS_HEARTBEAT_SECONDS: '1' });
  clients['2025'] = await connect(op.url, '2025');
  clients.current = await connect(op.url, 'current');
});
afterAll(async () => {
  await clients['2025']?.close();
  await clients.current?.close();
  await op?.stop();
  await deleteNamespace(k, ns);
});

const text = (r: ToolResult): string => r.content.map((c) => c.text ?? '').join('\n');

/**
 * The run's object once its final status is written: the caller gets its result first, the
 * status write follows a few ms later.
 */
async function finishedRun<T extends { status?: { phase?: string } }>(namespace: string, name: string): Promise<T> {
  let run: T | undefined;
  await until(
    async () => {
      run = (await k.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: SANDBOXRUN_PLURAL, name })) as T;
      return ['Succeeded', 'Failed', 'TimedOut'].includes(run.status?.phase ?? '');
    },
    10_000,
    `SandboxRun ${name} to record its result`,
  );
  return run as T;
}
const client = (era: Era): TestClient => clients[era] as TestClient;

describe.each(['2025', 'current'] as const)('execute_code over MCP (%s protocol client)', (era) => {
  it.each([
    { language: 'python', code: 'import sys\nprint(sum(range(10)))\nprint("warn", file=sys.stderr)', stdout: '45\n', stderr: 'warn\n' },
    { language: 'bash', code: 'echo "$((6*7))"; echo oops >&2', stdout: '42\n', stderr: 'oops\n' },
    { language: 'node', code: 'console.log([1,2,3].map(x => x * 2).join(","))', stdout: '2,4,6\n', stderr: undefined },
    { language: 'javascript', code: 'console.log(typeof process.version)', stdout: 'string\n', stderr: undefined },
  ])('runs $language', async ({ language, code, stdout, stderr }) => {
    const r = await client(era).callTool('execute_code', { code, language });
    expect(r.isError ?? false).toBe(false);
    expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', exit_code: 0, stdout });
    if (stderr) expect(r.structuredContent?.stderr).toBe(stderr);
    expect(text(r)).toContain(stdout.trim());
  });

  it('reports a non-zero exit as a normal result with the exit code', async () => {
    const r = await client(era).callTool('execute_code', { code: 'import sys\nprint("bye", file=sys.stderr)\nsys.exit(3)' });
    expect(r.isError ?? false).toBe(false);
    expect(r.structuredContent).toMatchObject({
      phase: 'Failed',
      reason: 'NonZeroExit',
      exit_code: 3,
      stderr: 'bye\n',
      message: 'The program exited with code 3; see stderr.',
    });
    expect(text(r)).toContain('exit code: 3');
  });

  // Whatever ran the program (kernel or runner) reports how much went to stderr; none: no pointer to it.
  it.each([
    ['python', 'import sys; sys.exit(4)', 4, ''],
    ['bash', 'kill -9 $$', 137, " (128 + 9: a shell's code for a process ended by SIGKILL)"],
  ])('says when a %s program that failed wrote nothing to stderr', async (language, code, exit_code, meaning) => {
    const r = await client(era).callTool('execute_code', { code, language });
    expect(r.structuredContent).toMatchObject({
      phase: 'Failed',
      reason: 'NonZeroExit',
      exit_code,
      message: `The program exited with code ${String(exit_code)}${meaning} and wrote nothing to stderr.`,
    });
    expect(r.structuredContent?.stderr ?? '').toBe('');
  });
});

describe('execute_code behaviour', () => {
  it('feeds stdin to the program', async () => {
    const r = await client('current').callTool('execute_code', { code: 'import sys\nprint(sys.stdin.read().upper())', stdin: 'hello' });
    expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: 'HELLO\n' });
  });

  it('stops an infinite loop at its timeout and records TimedOut', async () => {
    const r = await client('2025').callTool('execute_code', { code: 'import os\nos.fork()\nwhile True: pass', timeout_seconds: 2 });
    expect(r.isError).toBe(true);
    expect(r.structuredContent).toMatchObject({ phase: 'TimedOut', reason: 'DeadlineExceeded' });
    expect(text(r)).toMatch(/timeout/i);
    const run = await finishedRun<{ status: { phase: string; durationMs: number } }>(ns, String(r.structuredContent?.run));
    expect(run.status.phase).toBe('TimedOut');
    expect(run.status.durationMs).toBeGreaterThanOrEqual(2000);
  });

  it('caps 40 MB of output, reports the real size, and keeps the gateway memory bounded', async () => {
    const retained = async (): Promise<number> => {
      // Buffers' memory is released by finalizers after a collection: collect, yield, collect.
      for (let i = 0; i < 3; i++) {
        (globalThis as { gc?: () => void }).gc?.();
        await new Promise((r) => setTimeout(r, 50));
      }
      const m = process.memoryUsage();
      return m.heapUsed + m.external + m.arrayBuffers;
    };
    expect(typeof (globalThis as { gc?: unknown }).gc).toBe('function');
    const before = await retained();

    const r = await client('current').callTool('execute_code', {
      code: 'import sys\nfor _ in range(40):\n    sys.stdout.write("x" * (1024 * 1024))',
      timeout_seconds: 60,
    });
    const grew = (await retained()) - before;

    expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', truncated: true });
    expect(String(r.structuredContent?.stdout).length).toBeLessThanOrEqual(20_000);
    const run = await finishedRun<{ status: { phase: string; stdoutBytes: number; truncated: boolean } }>(ns, String(r.structuredContent?.run));
    expect(run.status).toMatchObject({ stdoutBytes: 40 * 1024 * 1024, truncated: true });
    // Holding the output would retain > 40 MB (80 MB as UTF-16 strings). What is retained after
    // the run is the capped 20,000 characters and a few caches — not a function of output size.
    expect(grew).toBeLessThan(4 * 1024 * 1024);
  });

  it.each(['2025', 'current'] as const)('sends output as progress notifications before the result (%s)', async (era) => {
    const events: string[] = [];
    const r = await client(era).callTool(
      'execute_code',
      { code: 'import time\nfor i in range(3):\n    print(f"tick {i}", flush=True)\n    time.sleep(0.4)' },
      (p) => events.push(`progress:${p.message ?? ''}`),
    );
    events.push('result');
    expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: 'tick 0\ntick 1\ntick 2\n' });
    const firstProgress = events.findIndex((e) => e.startsWith('progress:') && e.includes('tick 0'));
    expect(firstProgress).toBeGreaterThanOrEqual(0);
    expect(firstProgress).toBeLessThan(events.indexOf('result'));
  });
});

// A client gives up on a call after its request timeout unless progress resets it; a run that
// prints nothing for longer than that is kept alive by the gateway's heartbeat (1 s here).
describe.each(['2025', 'current'] as const)('a silent run and a client timeout shorter than it (%s)', (era) => {
  const silent = { code: 'import time\ntime.sleep(4)\nprint("done")' };

  it('completes when the client resets its timeout on progress (heartbeats without a message)', async () => {
    const beats: Array<{ progress: number; message?: string }> = [];
    const r = await client(era).callTool('execute_code', silent, (p) => beats.push(p), { timeout: 2_500, resetTimeoutOnProgress: true });
    expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: 'done\n' });
    // Heartbeats carry no message; the one message is the output, streamed as always.
    expect(beats.filter((b) => b.message === undefined).length).toBeGreaterThanOrEqual(2);
    expect(beats.flatMap((b) => (b.message === undefined ? [] : [b.message]))).toEqual(['done\n']);
    expect(beats.map((b) => b.progress)).toEqual(beats.map((_, i) => i + 1));
  });

  it('times out at the client otherwise (the timeout is real)', async () => {
    await expect(client(era).callTool('execute_code', silent, () => undefined, { timeout: 2_500 })).rejects.toThrow(/timed out|timeout/i);
  });
});

// With a warm pool the code runs through the claimed pod's kernel (op "run") instead of the
// runner exec: the same behaviour, checked on pods that are provably pool pods.
describe('execute_code on warm pool pods', () => {
  let poolNs = '';
  let poolOp: RunningOperator;
  let mcp: TestClient;
  beforeAll(async () => {
    poolNs = await createNamespace(k, 'run-warm');
    poolOp = await startOperator(poolNs, { CODEMODE_WARM_POOL_SIZE: '2', CODEMODE_OUTPUT_CAP_CHARS: '20000' });
    mcp = await connect(poolOp.url, 'current');
  });
  afterAll(async () => {
    await mcp?.close();
    await poolOp?.stop();
    await deleteNamespace(k, poolNs);
  });
  beforeEach(async () => {
    await until(async () => (await readyPoolPods(k, poolNs)).length > 0, 120_000, 'a ready pool pod');
  });
  const onPoolPod = (r: ToolResult): void => expect(String(r.structuredContent?.stdout)).toMatch(/^codemode-pool-python-/);

  it('runs python with stdin in a pool pod', async () => {
    const r = await mcp.callTool('execute_code', { code: 'import socket, sys\nprint(socket.gethostname())\nprint(sys.stdin.read().upper())', stdin: 'hello' });
    expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', exit_code: 0 });
    onPoolPod(r);
    expect(String(r.structuredContent?.stdout)).toMatch(/\nHELLO\n$/);
  });

  it.each([
    { language: 'bash', code: 'hostname; echo oops >&2; exit 3', phase: 'Failed', exit_code: 3, stderr: 'oops\n' },
    { language: 'node', code: 'console.log(require("os").hostname()); process.exitCode = 0', phase: 'Succeeded', exit_code: 0, stderr: undefined },
  ])('runs $language in a pool pod with its exit code', async ({ language, code, phase, exit_code, stderr }) => {
    const r = await mcp.callTool('execute_code', { code, language });
    expect(r.structuredContent).toMatchObject({ phase, exit_code });
    onPoolPod(r);
    if (stderr) expect(r.structuredContent?.stderr).toBe(stderr);
  });

  it('stops an infinite loop and its children at the timeout and records TimedOut', async () => {
    const r = await mcp.callTool('execute_code', {
      code: 'import os, socket\nprint(socket.gethostname(), flush=True)\nos.fork()\nwhile True: pass',
      timeout_seconds: 2,
    });
    expect(r.isError).toBe(true);
    expect(r.structuredContent).toMatchObject({ phase: 'TimedOut', reason: 'DeadlineExceeded' });
    onPoolPod(r);
    const run = await finishedRun<{ status: { phase: string; durationMs: number } }>(poolNs, String(r.structuredContent?.run));
    expect(run.status.phase).toBe('TimedOut');
    expect(run.status.durationMs).toBeGreaterThanOrEqual(2000);
  });

  it('streams progress before the result and caps large output', async () => {
    const events: string[] = [];
    const r = await mcp.callTool(
      'execute_code',
      { code: 'import socket, sys, time\nprint(socket.gethostname(), flush=True)\ntime.sleep(0.5)\nsys.stdout.write("x" * 5_000_000)' },
      (p) => events.push(`progress:${p.message ?? ''}`),
    );
    events.push('result');
    onPoolPod(r);
    expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', truncated: true });
    expect(String(r.structuredContent?.stdout).length).toBe(20_000);
    const firstProgress = events.findIndex((e) => e.includes('codemode-pool-python-'));
    expect(firstProgress).toBeGreaterThanOrEqual(0);
    expect(firstProgress).toBeLessThan(events.indexOf('result'));
    const run = await finishedRun<{ status: { phase: string; stdoutBytes: number } }>(poolNs, String(r.structuredContent?.run));
    expect(run.status.stdoutBytes).toBeGreaterThan(5_000_000);
  });
});
