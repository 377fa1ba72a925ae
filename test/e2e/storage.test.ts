// Bounded storage on the real cluster: a namespace of maximum-size finished runs does not
// end up in the gateway's memory (the informer caches them without code or output), a restart
// over them starts and serves runs, a run created through the API is executed from one read of
// the whole object, a raw exec that times out closes its websocket, and list_files stays right
// when session code names files to break the listing or writes into the file helper's stdout.
import { Exec, PatchStrategy, setHeaderOptions, type KubernetesObject } from '@kubernetes/client-node';
import type WebSocket from 'isomorphic-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  API_VERSION,
  GROUP,
  MAX_CODE_BYTES_HARD,
  MAX_OUTPUT_BYTES_HARD,
  MAX_STDIN_BYTES,
  SANDBOXRUN_KIND,
  SANDBOXRUN_PLURAL,
  VERSION,
  jsonSize,
} from '../../src/api/v1alpha1/index.js';
import { execRaw } from '../../src/exec/exec.js';
import { createNamespace, deleteNamespace, runPod, simplePod, testKube, until } from './helpers/kube.js';
import { connect, type TestClient, type ToolResult } from './helpers/operator.js';
import { startOperator, type RunningOperator } from './helpers/start-operator.js';

const k = testKube();
let ns: string;
let op: RunningOperator | undefined;
// 100 MiB in etcd per test run: the assertions are about what is cached, not how much RSS it takes.
const RUNS = 100;

function text(seed: number, bytes: number): string {
  const unit = `run ${seed} `.padEnd(64, 'x');
  return unit.repeat(Math.ceil(bytes / unit.length)).slice(0, bytes);
}

/** A finished run of the largest size the API takes, written straight through the API. */
async function seedMaxRun(i: number): Promise<void> {
  const name = `max-${String(i).padStart(4, '0')}`;
  await k.custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural: SANDBOXRUN_PLURAL,
    body: {
      apiVersion: API_VERSION,
      kind: SANDBOXRUN_KIND,
      metadata: { name, annotations: { 'codemode.dev/executor': 'seed' } },
      spec: { language: 'python', code: text(i, MAX_CODE_BYTES_HARD), stdin: text(i, MAX_STDIN_BYTES) },
    },
  });
  const now = new Date().toISOString();
  await k.custom.patchNamespacedCustomObjectStatus(
    {
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: SANDBOXRUN_PLURAL,
      name,
      body: {
        status: {
          phase: 'Succeeded',
          reason: 'Succeeded',
          message: 'The program exited with code 0.',
          exitCode: 0,
          stdout: text(i, MAX_OUTPUT_BYTES_HARD),
          stderr: text(i + 1, MAX_OUTPUT_BYTES_HARD),
          completionTime: now,
          startTime: now,
        },
      },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

beforeAll(async () => {
  ns = await createNamespace(k, 'e2e-storage');
  // Small batches: each request carries 512 KiB, then 1 MiB, and the API server shares the node.
  for (let i = 0; i < RUNS; i += 8) await Promise.all(Array.from({ length: Math.min(8, RUNS - i) }, (_, j) => seedMaxRun(i + j)));
}, 600_000);

afterAll(async () => {
  await op?.stop();
  await k.custom.deleteCollectionNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL }).catch(() => undefined);
  await deleteNamespace(k, ns);
}, 120_000);

describe('a namespace full of maximum-size finished runs', () => {
  it('starts the operator, whose cache holds no code, stdin or output, and serves runs', async () => {
    // Tiny requests: what is tested is the cache, not whether a shared, busy node has CPU to spare.
    op = await startOperator(ns, { CODEMODE_CPU_REQUEST: '1m', CODEMODE_MEMORY_REQUEST: '16Mi' });
    const cached = op.operator.runCache.list() as ReadonlyArray<KubernetesObject & { spec?: Record<string, unknown>; status?: Record<string, unknown> }>;
    expect(cached.length).toBeGreaterThanOrEqual(RUNS);
    for (const obj of cached) {
      expect(obj.spec, obj.metadata?.name).not.toHaveProperty('code');
      expect(obj.spec).not.toHaveProperty('stdin');
      expect(obj.status ?? {}).not.toHaveProperty('stdout');
      expect(obj.status ?? {}).not.toHaveProperty('stderr');
      expect(obj.metadata).not.toHaveProperty('managedFields');
    }
    // 100 MiB in the API server, a few hundred KiB in the cache.
    expect(jsonSize(cached)).toBeLessThan(RUNS * 2048);

    const outcome = await op.operator.runService.execute({ language: 'python', code: 'print(6 * 7)' });
    expect(outcome, `${outcome.reason}: ${outcome.message}`).toMatchObject({ phase: 'Succeeded', stdout: '42\n' });
  }, 300_000);

  it('executes a run created through the API (its code read whole when it runs)', async () => {
    expect(op).toBeDefined();
    const name = 'from-kubectl';
    await k.custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: SANDBOXRUN_PLURAL,
      body: {
        apiVersion: API_VERSION,
        kind: SANDBOXRUN_KIND,
        metadata: { name },
        spec: { language: 'python', code: 'import sys\nprint(sys.stdin.read().upper())', stdin: 'hello' },
      },
    });
    let status: { phase?: string; stdout?: string } = {};
    await until(
      async () => {
        const obj = (await k.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL, name })) as {
          status?: typeof status;
        };
        status = obj.status ?? {};
        return status.phase === 'Succeeded' || status.phase === 'Failed';
      },
      180_000,
      'the API-created run to finish',
    );
    expect(status).toMatchObject({ phase: 'Succeeded', stdout: 'HELLO\n' });
    const cached = op?.operator.runCache.list().find((o) => o.metadata?.name === name) as { spec?: object } | undefined;
    expect(cached?.spec).not.toHaveProperty('code');
  }, 240_000);
});

describe('a session that names files to break the listing', () => {
  // Session code runs as the helper's uid in its pid namespace: it can write into the helper's
  // stdout (/proc/<pid>/fd/1) while it runs. This thread does so once per list helper it sees.
  const INJECTOR = `
import os, signal, threading, time
injected = []
stop_injecting = False
def inject():
    seen = set()
    while not stop_injecting:
        for p in os.listdir("/proc"):
            if not p.isdigit() or p in seen: continue
            try: cmd = open("/proc/%s/cmdline" % p, "rb").read().split(b"\\0")
            except OSError: continue
            if len(cmd) > 6 and cmd[1:4] == [b"-I", b"-S", b"-c"] and cmd[5] == b"list":
                seen.add(p)
                try:
                    os.kill(int(p), signal.SIGSTOP)
                    fd = os.open("/proc/%s/fd/1" % p, os.O_WRONLY)
                    # Counted before writing: the gateway refuses the listing (and closes the
                    # stream, so the write may end with EPIPE) before this thread could count it after.
                    injected.append(p)
                    data = b"f\\tNaN\\tforged\\n" * (256 * 1024)
                    try:
                        while data: data = data[os.write(fd, data):]
                    except OSError:
                        pass
                    os.close(fd)
                finally:
                    os.kill(int(p), signal.SIGCONT)
        time.sleep(0.0005)
threading.Thread(target=inject, daemon=True).start()
"started"
`;
  const HOSTILE = ['x\nf\tNaN\tforged', '\n'.repeat(200) + 'many', 'f\t1\tfake\nd\t0\tfakedir\n'];
  let mcp: TestClient | undefined;
  afterAll(async () => mcp?.close());
  const sc = (r: ToolResult): Record<string, unknown> => r.structuredContent ?? {};

  it('lists the real entries, and calls a listing forged into the helper unreadable', async () => {
    expect(op).toBeDefined();
    mcp = await connect(op!.url, 'current');
    const created = await mcp.callTool('create_session', { language: 'python' });
    expect(created.isError ?? false, JSON.stringify(created.content)).toBe(false);
    const s = String(sc(created).session);
    const made = await mcp.callTool('execute_code', {
      session: s,
      code: `import os\nos.makedirs("/workspace/h/realdir")\nfor n in ${JSON.stringify([...HOSTILE, 'real.txt'])}:\n    open("/workspace/h/" + n, "w").write("abc")`,
    });
    expect(sc(made), JSON.stringify(made.content)).toMatchObject({ phase: 'Succeeded' });
    const real = [
      ...HOSTILE.map((name) => ({ name, type: 'file', size: 3 })),
      { name: 'real.txt', type: 'file', size: 3 },
      { name: 'realdir', type: 'directory', size: expect.any(Number) },
    ];
    real.sort((a, b) => (a.name < b.name ? -1 : 1));
    const listed = await mcp.callTool('list_files', { session: s, path: 'h' });
    expect(listed.isError ?? false, JSON.stringify(listed.content)).toBe(false);
    expect(sc(listed)).toEqual({ path: 'h', entries: real, truncated: false });
    // The text shows one line per entry: a name with control characters quoted and escaped.
    const lines = String(listed.content[0]?.text).split('\n');
    expect(lines).toHaveLength(real.length);
    expect(lines).toContain(`${JSON.stringify(HOSTILE[0])}\t3`);
    // Each opens again by its listed name (not the last: workspacePath trims a trailing newline).
    for (const name of HOSTILE.slice(0, 2)) expect(sc(await mcp.callTool('read_file', { session: s, path: `h/${name}` }))).toMatchObject({ content: 'abc' });

    expect(sc(await mcp.callTool('execute_code', { session: s, code: INJECTOR }))).toMatchObject({ phase: 'Succeeded' });
    let refused = 0;
    for (let i = 0; i < 5; i++) {
      const r = await mcp.callTool('list_files', { session: s, path: 'h' });
      // The helper's output is not trusted: either the real listing or a clear refusal, never a forged entry.
      if (r.isError) {
        expect(r.content[0]?.text).toMatch(/^list_files failed: the listing from the pod could not be read \(more output than 1001 entries can take/);
        refused++;
      } else expect(sc(r)).toEqual({ path: 'h', entries: real, truncated: false });
    }
    const injected = await mcp.callTool('execute_code', { session: s, code: 'stop_injecting = True\nlen(injected)' });
    expect(refused).toBe(Number(sc(injected).result));
    expect(refused).toBeGreaterThan(0);
    expect(sc(await mcp.callTool('list_files', { session: s, path: 'h' }))).toEqual({ path: 'h', entries: real, truncated: false });
  }, 300_000);
});

describe('a raw exec', () => {
  /** The real Exec, keeping every websocket it opens so the test can look at it afterwards. */
  class SpyExec extends Exec {
    readonly sockets: WebSocket.WebSocket[] = [];
    override async exec(...args: Parameters<Exec['exec']>): Promise<WebSocket.WebSocket> {
      const ws = await super.exec(...args);
      this.sockets.push(ws);
      return ws;
    }
  }

  it('closes its websocket when the watchdog fires', async () => {
    await runPod(k, ns, simplePod('exec-target', ['sleep', '3600']));
    const spy = new SpyExec(k.kc);
    const r = await execRaw(spy, ns, 'exec-target', 'main', ['sleep', '300'], undefined, 1024, 2000);
    expect(r.error).toMatch(/no result within 2000 ms/);
    expect(spy.sockets).toHaveLength(1);
    // CLOSED (3): before the fix the stream stayed OPEN (1) for as long as the command ran.
    await until(() => spy.sockets[0]!.readyState === 3, 10_000, 'the exec websocket to close');
  }, 180_000);

  it('stops reading at once past its stdout bound, closing the stream, not at the watchdog', async () => {
    await runPod(k, ns, simplePod('exec-flood', ['sleep', '3600']));
    const spy = new SpyExec(k.kc);
    // A program that goes on writing (and then sleeps) after the bound: the answer is refused already.
    const r = await execRaw(spy, ns, 'exec-flood', 'main', ['sh', '-c', 'head -c 100000 /dev/zero; sleep 300'], undefined, 1024, 120_000);
    expect(r).toMatchObject({ overflow: true, error: 'more than 1024 bytes of output' });
    expect(r.exitCode).toBeUndefined();
    expect(r.stdout).toHaveLength(1024);
    await until(() => spy.sockets[0]!.readyState === 3, 10_000, 'the exec websocket to close');
  }, 180_000);

  it('keeps 4 KiB of stderr, however much a message carries', async () => {
    await runPod(k, ns, simplePod('exec-stderr', ['sleep', '3600']));
    const r = await execRaw(new Exec(k.kc), ns, 'exec-stderr', 'main', ['sh', '-c', 'head -c 200000 /dev/zero | tr "\\0" e >&2; echo done'], undefined, 1024);
    expect(r.stdout.toString()).toBe('done\n');
    expect(r.stderr).toBe('e'.repeat(4096));
  }, 180_000);
});
