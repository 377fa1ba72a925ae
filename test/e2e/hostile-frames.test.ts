// Hostile frames (issue 14, point 1): session code runs inside the kernel process, so it can write
// whatever it likes into the kernel's streams, i.e. into the stream the gateway reads. Each attack
// runs in its own session while a benign neighbour keeps calling in another; the attacker's call
// must get a clear error (or its session become Lost with a reason), the neighbour must stay
// correct, and the gateway (this test process) must survive. Also: same-uid programs cannot
// reach the kernel's or the relays' descriptors through /proc.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, SANDBOXSESSION_PLURAL, VERSION } from '../../src/api/v1alpha1/index.js';
import { startBenignNeighbour, type BenignNeighbour } from './helpers/benign.js';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { connect, type TestClient, type ToolResult } from './helpers/operator.js';
import { startOperator, type RunningOperator } from './helpers/start-operator.js';

const k = testKube();
let ns = '';
let op: RunningOperator;
let mcp: TestClient;
let neighbour: BenignNeighbour;
let neighbourStopped = false;

beforeAll(async () => {
  ns = await createNamespace(k, 'hostile-frames');
  op = await startOperator(ns, { CODEMODE_WARM_POOL_SIZE: '2' }, { metrics: true });
  mcp = await connect(op.url, 'current');
  neighbour = await startBenignNeighbour(op.url, { runEvery: 4 });
}, 180_000);
afterAll(async () => {
  try {
    // Stopped by the last test; when a filter (-t) skipped it, its calls would keep the operator busy.
    if (!neighbourStopped) await neighbour?.stop().catch(() => undefined);
    await mcp?.close().catch(() => undefined);
    await op?.stop();
  } finally {
    // Whatever failed above: a namespace left behind keeps its pods on the node for good.
    await deleteNamespace(k, ns);
  }
});

/** Per attack: a session start and a call, on a cluster other suites may be loading too. */
const ATTACK_TIMEOUT_MS = 240_000;

const sc = (r: ToolResult): Record<string, unknown> => r.structuredContent ?? {};
const text = (r: ToolResult): string => `${JSON.stringify(r.structuredContent ?? {})} ${r.content.map((c) => c.text ?? '').join('\n')}`;

async function newSession(): Promise<string> {
  const r = await mcp.callTool('create_session', { language: 'python' });
  expect(r.isError ?? false, text(r)).toBe(false);
  return String(sc(r).session);
}

/**
 * Python for session code: `frames` display frames of ~0.9 MB each, well inside a call's display
 * bounds, padded with a key the schema drops that holds arrays nested 450,000 deep (each ~100-200
 * ms of JSON.parse), then 'done'.
 */
const slowFrames = (frames: number): string => `${BLAST}
n = 450000
for _ in range(${String(frames)}):
    body = ('{"id": "%s", "type": "display", "kind": "text", "format": "note", "text": "n", "pad": ' % call_id()).encode() + b'[' * n + b']' * n + b'}'
    blast(b'%d\\n' % len(body) + body)
print('done')`;

/** Seconds this replica paused kernel streams for a `budget` (pod or user) reading budget. */
async function pausedSeconds(budget: 'pod' | 'user'): Promise<number> {
  const metrics = (await op.metrics?.registry.metrics()) ?? '';
  return Number(new RegExp(`^codemode_kernel_stream_paused_seconds_total\\{budget="${budget}"\\} (\\S+)$`, 'm').exec(metrics)?.[1] ?? 0);
}

async function sessionStatus(name: string): Promise<{ phase?: string; message?: string }> {
  const s = (await op.clients.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXSESSION_PLURAL, name })) as {
    status?: { phase?: string; message?: string };
  };
  return s.status ?? {};
}

/**
 * Python for session code: writes `data` into every stream the kernel writes frames to, i.e. what
 * the gateway reads: the exec stream's stdout a relay handed over, or the relay's socket. Found
 * the way any code in the kernel's process can, through the garbage collector.
 */
const BLAST = `
import os
def streams():
    import gc
    out = []
    for c in gc.get_objects():
        if type(c).__name__ == 'Connection':
            out.append(c.pipes[1] if c.pipes else c.sock.fileno())
    return out
def blast(data, times=1):
    hit = 0
    for fd in streams():
        try:
            for _ in range(times):
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            hit += 1
        except OSError:
            pass
    return hit
def call_id():
    import gc
    ids = [o.call_id for o in gc.get_objects() if type(o).__name__ == 'CallOutput']
    return max(ids, key=int)
def frame(obj):
    import json
    body = json.dumps(obj).encode()
    return b'%d\\n%s' % (len(body), body)
`;

/** Python: every process whose command line names `names`, and whether its fds could be opened. */
const PROBE = `
import os
found = []
for pid in os.listdir('/proc'):
    if not pid.isdigit() or int(pid) == os.getpid():
        continue
    try:
        cmd = open('/proc/%s/cmdline' % pid, 'rb').read().replace(b'\\0', b' ').decode()
    except OSError:
        continue
    if 'relay.py' not in cmd and 'kernel.py' not in cmd:
        continue
    kind = 'relay' if 'relay.py' in cmd else 'kernel'
    try:
        fds = os.listdir('/proc/%s/fd' % pid)
        outcome = 'listed'
    except PermissionError:
        fds, outcome = ['0', '1', '2', '3', '4', '5'], 'denied'
    for fd in fds:
        try:
            w = os.open('/proc/%s/fd/%s' % (pid, fd), os.O_WRONLY | os.O_NONBLOCK)
            os.write(w, b'4\\nnull')
            os.close(w)
            outcome = 'OPENED'
        except OSError:
            pass
    found.append('%s:%s' % (kind, outcome))
print(' '.join(sorted(found)))
`;

describe('same-uid programs cannot reach the kernel or the relays through /proc', () => {
  it('from session code (the kernel process itself), the relay is out of reach', async () => {
    const s = await newSession();
    const r = await mcp.callTool('execute_code', { session: s, code: PROBE });
    expect(sc(r), text(r)).toMatchObject({ phase: 'Succeeded' });
    // The kernel is this very process (skipped); the relay is its own, non-dumpable process.
    expect(String(sc(r).stdout).trim()).toMatch(/^(relay:denied ?)+$/);
  });

  it(
    "from a warm run's program, neither the kernel nor the relay is reachable",
    async () => {
      // A run meets a kernel only in a warm pod; when the pool is empty it runs cold: try again.
      let found: string[] = [];
      // Earlier attacks in this file lose their sessions' pool pods; the pool refills meanwhile.
      const deadline = Date.now() + 180_000;
      for (let attempt = 0; Date.now() < deadline && !found.some((f) => f.startsWith('kernel:')); attempt++) {
        if (attempt > 0) await new Promise((r) => setTimeout(r, 5000));
        const r = await mcp.callTool('execute_code', { code: PROBE });
        expect(sc(r), text(r)).toMatchObject({ phase: 'Succeeded' });
        found = String(sc(r).stdout).trim().split(' ');
      }
      expect(found).toContain('kernel:denied');
      expect(found).toContain('relay:denied');
      expect(found.every((f) => f.endsWith(':denied'))).toBe(true);
    },
    ATTACK_TIMEOUT_MS,
  );
});

const attacks: [string, string][] = [
  ['the frame 4\\nnull', `blast(b'4\\nnull')`],
  ['a malformed header', `blast(b'hello, gateway\\n')`],
  ['a body that is not JSON', `blast(b'5\\n{{{{{')`],
  ['a 64 MiB frame', `blast(b'%d\\n' % (64 << 20) + b'A' * (4 << 20))`],
  [
    'frames for unknown ids',
    `blast(frame({'id': '999999', 'type': 'result', 'status': 'ok', 'stdout': '', 'stderr': '', 'stdoutBytes': 0, 'stderrBytes': 0, 'truncated': False, 'durationMs': 1}), 100)`,
  ],
  ['a flood of output frames for its own call', `blast(frame({'id': call_id(), 'type': 'output', 'stream': 'stdout', 'text': 'F' * 60000}), 200)`],
  // No characters to count: only the frames' number bounds what parsing them costs the gateway.
  ['a flood of empty output frames for its own call', `blast(frame({'id': call_id(), 'type': 'output', 'stream': 'stdout', 'text': ''}) * 5000)`],
  // No text for the output budget to count: each frame a parse of megabytes of keys the schema drops.
  [
    'output frames padded with keys for its own call',
    `blast(frame(dict({'id': call_id(), 'type': 'output', 'stream': 'stdout', 'text': ''}, **{'k%d' % i: 0 for i in range(200000)})), 20)`,
  ],
  // Each within the decoder's bound for one frame, together more than any call's display caps allow.
  [
    'display frames of the largest size for its own call',
    `blast(frame({'id': call_id(), 'type': 'display', 'kind': 'text', 'format': 'html', 'text': 'D' * 2700000}), 10)`,
  ],
  // Within the display bounds, but a frame above any call frame made of containers: ~200 ms a MiB to parse.
  [
    'a display frame above 1 MiB of nested arrays for its own call',
    `body = ('{"id": "%s", "type": "display", "kind": "text", "format": "note", "text": "n", "pad": ' % call_id()).encode() + b'[' * 600000 + b']' * 600000 + b'}'\nblast(b'%d\\n' % len(body) + body)`,
  ],
  ['a result of the wrong shape for its own call', `blast(frame({'id': call_id(), 'type': 'result', 'status': 'ok', 'stdoutBytes': -1}))`],
  ['a pong for its own call', `blast(frame({'id': call_id(), 'type': 'pong'}))`],
  // Each would have the call sent again (busy) or read back over a new stream (error), with fresh
  // budgets: after output of the call, either is a breach.
  [
    'a busy answer after output of its own call',
    `print('started', flush=True)\nimport time\ntime.sleep(0.5)\nblast(frame({'id': call_id(), 'type': 'result', 'status': 'error', 'busy': True, 'stdout': '', 'stderr': '', 'stdoutBytes': 0, 'stderrBytes': 0, 'truncated': False, 'durationMs': 0, 'error': {'ename': 'KernelBusy', 'evalue': 'x', 'traceback': ''}}))`,
  ],
  [
    'an error frame after output of its own call',
    `print('started', flush=True)\nimport time\ntime.sleep(0.5)\nblast(frame({'type': 'error', 'message': 'bad frame'}))`,
  ],
];

describe('hostile frames from session code', () => {
  it.each(attacks)(
    '%s: the call fails clearly, the session is Lost with the reason, nothing else is hurt',
    async (_name, attack) => {
      const s = await newSession();
      const r = await mcp.callTool('execute_code', { session: s, code: `${BLAST}\n${attack}\nimport time\ntime.sleep(30)` });
      expect(r.isError, text(r)).toBe(true);
      expect(text(r)).toMatch(/broke the kernel protocol/);
      await until(async () => (await sessionStatus(s)).phase === 'Lost', 30_000, `session ${s} Lost`).catch(async (err: unknown) => {
        throw new Error(`${String(err)}: ${JSON.stringify(await sessionStatus(s))}`);
      });
      expect((await sessionStatus(s)).message).toMatch(/broke the kernel protocol/);
      const again = await mcp.callTool('execute_code', { session: s, code: '1' });
      expect(again.isError).toBe(true);
      expect(text(again)).toMatch(/lost/i);
    },
    ATTACK_TIMEOUT_MS,
  );

  it(
    'a breach between calls (from a background thread) loses the session at its next call',
    async () => {
      const s = await newSession();
      const first = await mcp.callTool('execute_code', {
        session: s,
        code: `${BLAST}\nimport threading, time\nthreading.Thread(target=lambda: (time.sleep(2), blast(b'4\\nnull')), daemon=True).start()`,
      });
      expect(sc(first), text(first)).toMatchObject({ phase: 'Succeeded' });
      await new Promise((r) => setTimeout(r, 5000));
      const next = await mcp.callTool('execute_code', { session: s, code: '1' });
      expect(next.isError, text(next)).toBe(true);
      expect(text(next)).toMatch(/broke the kernel protocol/);
      await until(async () => (await sessionStatus(s)).phase === 'Lost', 30_000, `session ${s} Lost`);
    },
    ATTACK_TIMEOUT_MS,
  );

  it(
    "frames within every bound but slow to read: the pod's stream is paused for its reading budget, nothing fails",
    async () => {
      const paused = async (): Promise<number> => (await pausedSeconds('pod')) + (await pausedSeconds('user'));
      const before = await paused();
      const s = await newSession();
      const r = await mcp.callTool('execute_code', {
        session: s,
        timeout_seconds: 200,
        code: slowFrames(8),
      });
      expect(sc(r), text(r)).toMatchObject({ phase: 'Succeeded', stdout: 'done\n' });
      expect(await paused()).toBeGreaterThan(before);
      const again = await mcp.callTool('execute_code', { session: s, code: '1 + 1' });
      expect(sc(again), text(again)).toMatchObject({ phase: 'Succeeded', result: '2' });
    },
    ATTACK_TIMEOUT_MS,
  );

  it(
    "one user's sessions share a reading budget: three pods' slow frames are paused for the user's, nothing fails",
    async () => {
      // Auth mode none: every caller is the one anonymous user. Three frames per pod (~0.3-0.6 s of
      // JSON.parse) are about one pod's burst; three pods together are well past the user's.
      const before = await pausedSeconds('user');
      const sessions = await Promise.all([newSession(), newSession(), newSession()]);
      const results = await Promise.all(
        sessions.map((s) =>
          mcp.callTool('execute_code', {
            session: s,
            timeout_seconds: 200,
            code: slowFrames(3),
          }),
        ),
      );
      for (const r of results) expect(sc(r), text(r)).toMatchObject({ phase: 'Succeeded', stdout: 'done\n' });
      expect(await pausedSeconds('user')).toBeGreaterThan(before);
    },
    ATTACK_TIMEOUT_MS,
  );

  it(
    'a forged result for its own call is cut to the cap and harms no one',
    async () => {
      const s = await newSession();
      const cap = op.config.outputCapChars;
      const r = await mcp.callTool('execute_code', {
        session: s,
        code: `${BLAST}\nblast(frame({'id': call_id(), 'type': 'result', 'status': 'ok', 'stdout': 'S' * ${cap * 3}, 'stderr': '', 'stdoutBytes': 1, 'stderrBytes': 0, 'truncated': False, 'durationMs': 1, 'result': 'R' * ${cap * 2}}))\nimport time\ntime.sleep(2)`,
      });
      expect(sc(r).stdout).toBe('S'.repeat(cap));
      expect(sc(r)).toMatchObject({ truncated: true });
      expect(String(sc(r).result).length).toBe(cap);
    },
    ATTACK_TIMEOUT_MS,
  );

  it(
    'a forged refusal for the network (no check was asked) does not have code that ran reported as never started',
    async () => {
      const s = await newSession();
      const r = await mcp.callTool('execute_code', {
        session: s,
        code: `${BLAST}\nran = 1\nblast(frame({'id': call_id(), 'type': 'result', 'status': 'error', 'notIsolated': True, 'stdout': '', 'stderr': '', 'stdoutBytes': 0, 'stderrBytes': 0, 'truncated': False, 'durationMs': 0, 'error': {'ename': 'NetworkNotIsolated', 'evalue': 'forged', 'traceback': ''}}))\nimport time\ntime.sleep(2)`,
      });
      expect(text(r)).not.toMatch(/not run/);
      expect(sc(r), text(r)).toMatchObject({ phase: 'Failed', reason: 'Exception' });
      // It did run: the session holds what it set.
      expect(sc(await mcp.callTool('execute_code', { session: s, code: 'ran' })), text(r)).toMatchObject({ phase: 'Succeeded', result: '1' });
    },
    ATTACK_TIMEOUT_MS,
  );

  it(
    'an output flood and an exception flood are capped',
    async () => {
      const s = await newSession();
      const cap = op.config.outputCapChars;
      const out = await mcp.callTool('execute_code', {
        session: s,
        code: `import sys\nfor _ in range(50):\n    sys.stdout.write('o' * 200000)\n    sys.stderr.write('e' * 200000)`,
      });
      expect(sc(out)).toMatchObject({ phase: 'Succeeded', truncated: true });
      expect(String(sc(out).stdout).length).toBe(cap);
      expect(String(sc(out).stderr).length).toBe(cap);
      const exc = await mcp.callTool('execute_code', { session: s, code: `raise ValueError('v' * 10_000_000)` });
      expect(sc(exc)).toMatchObject({ phase: 'Failed', reason: 'Exception' });
      expect(String(sc(exc).stderr).length).toBeLessThanOrEqual(cap);
      expect(text(exc).length).toBeLessThan(10 * cap);
      expect(sc(await mcp.callTool('execute_code', { session: s, code: '6 * 7' }))).toMatchObject({ phase: 'Succeeded', result: '42' });
    },
    ATTACK_TIMEOUT_MS,
  );

  it(
    'a kernel killed mid-call: the call fails and the session is Lost with a reason',
    async () => {
      const s = await newSession();
      const r = await mcp.callTool('execute_code', { session: s, code: 'import os\nprint("bye", flush=True)\nos.kill(os.getpid(), 9)' });
      expect(r.isError, text(r)).toBe(true);
      expect(text(r)).toMatch(/lost/i);
      await until(async () => (await sessionStatus(s)).phase === 'Lost', 30_000, `session ${s} Lost`);
      // The gateway (the stream closed) or the controller (the pod failed) may tell first.
      expect((await sessionStatus(s)).message).toMatch(/.{10,}/);
    },
    ATTACK_TIMEOUT_MS,
  );
});

describe('after the attacks', () => {
  it('the benign neighbour stayed correct and the gateway is alive', async () => {
    neighbourStopped = true;
    const report = await neighbour.stop();
    expect(report.failures).toEqual([]);
    expect(report.calls).toBeGreaterThan(3);
    const list = await mcp.callTool('list_sessions', {});
    expect(list.isError ?? false).toBe(false);
  });
});
