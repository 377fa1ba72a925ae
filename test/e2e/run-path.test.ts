// The core path end to end: MCP execute_code → SandboxRun → hardened pod → exec → result, with
// real MCP clients of both protocol eras against an operator running on the real test cluster.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, SANDBOXRUN_PLURAL, VERSION } from '../../src/api/v1alpha1/index.js';
import { createNamespace, deleteNamespace, testKube } from './helpers/kube.js';
import { connect, startOperator, type Era, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';

const k = testKube();
let ns = '';
let op: RunningOperator;
const clients: Partial<Record<Era, TestClient>> = {};

beforeAll(async () => {
  ns = await createNamespace(k, 'run-path');
  op = await startOperator(ns, { CODEMODE_OUTPUT_CAP_CHARS: '20000', CODEMODE_MAX_TIMEOUT_SECONDS: '60' });
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
    expect(r.structuredContent).toMatchObject({ phase: 'Failed', reason: 'NonZeroExit', exit_code: 3, stderr: 'bye\n' });
    expect(text(r)).toContain('exit code: 3');
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
    const run = (await k.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL, name: String(r.structuredContent?.run) })) as { status: { phase: string; durationMs: number } };
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

    const r = await client('current').callTool('execute_code', { code: 'import sys\nfor _ in range(40):\n    sys.stdout.write("x" * (1024 * 1024))', timeout_seconds: 60 });
    const grew = (await retained()) - before;

    expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', truncated: true });
    expect(String(r.structuredContent?.stdout).length).toBeLessThanOrEqual(20_000);
    const run = (await k.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL, name: String(r.structuredContent?.run) })) as { status: { stdoutBytes: number; truncated: boolean } };
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
