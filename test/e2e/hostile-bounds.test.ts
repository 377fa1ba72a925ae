// Hostile suite, resource bounds (issue 14, point 2): a fork bomb, a memory bomb and a disk fill of
// /workspace and /tmp, in cold runs, warm (pool) runs and a session, each ending with a reason a
// user can act on (ProcessLimit, OOMKilled, DiskFull) and never ExecFailed, while a benign
// neighbour keeps calling in its own session and every one of its calls stays correct.
// Limits are small on purpose (64Mi /workspace, 16Mi /tmp, 256Mi memory) so the disk and memory
// of the shared test machine are never at risk.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, SANDBOXRUN_PLURAL, VERSION } from '../../src/api/v1alpha1/index.js';
import { startBenignNeighbour, type BenignNeighbour } from './helpers/benign.js';
import { createNamespace, deleteNamespace, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';

const k = testKube();
const LIMITS = {
  CODEMODE_WORKSPACE_SIZE_LIMIT: '64Mi',
  CODEMODE_TMP_SIZE_LIMIT: '16Mi',
  CODEMODE_DEFAULT_MEMORY: '256Mi',
  CODEMODE_MAX_TIMEOUT_SECONDS: '60',
};
const TEST_TIMEOUT_MS = 180_000;

/**
 * The attacks: code, language, timeout and the reason the run must end with. The classic bash
 * fork bomb exits 0 at once: everything it left running is killed then, usually after some fork
 * met the cap (ProcessLimit), sometimes before (Succeeded, saying what was left running).
 */
const ATTACKS = {
  bashForkBomb: { language: 'bash', code: ':(){ :|:& };:', timeout_seconds: 10, reason: 'ProcessLimit' },
  pythonForkBomb: {
    language: 'python',
    code: 'import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass',
    timeout_seconds: 10,
    reason: 'ProcessLimit',
  },
  memoryBomb: { language: 'python', code: 'a = []\nwhile True:\n    a.append(b"x" * (16 << 20))', timeout_seconds: 30, reason: 'OOMKilled' },
  workspaceFill: {
    language: 'python',
    code: 'with open("/workspace/fill", "wb") as f:\n    while True:\n        f.write(b"x" * (1 << 20))\n        f.flush()',
    timeout_seconds: 30,
    reason: 'DiskFull',
  },
  // Empty files take no disk blocks: each counts 4 KiB against the limit instead (64Mi: 16,384
  // files), or one sandbox could use up the node's inodes.
  workspaceFiles: {
    language: 'python',
    code: 'import os\nn = 0\nwhile True:\n    os.close(os.open("/workspace/f%d" % n, os.O_CREAT | os.O_WRONLY))\n    n += 1',
    timeout_seconds: 30,
    reason: 'DiskFull',
  },
  // A directory without read permission still takes new files: the walk cannot count what it
  // holds, so such a directory counts as full (its owner, the sandbox's user, can chmod it back).
  workspaceHiddenFiles: {
    language: 'python',
    code: 'import os\nos.mkdir("/workspace/d", 0o300)\nn = 0\nwhile True:\n    os.close(os.open("/workspace/d/f%d" % n, os.O_CREAT | os.O_WRONLY))\n    n += 1',
    timeout_seconds: 30,
    reason: 'DiskFull',
  },
  // Files deleted while open take disk blocks du does not see, as many as the program opens (the
  // file limit bounds each): counted from /proc/<pid>/fd. At most 640 MiB if that count failed,
  // then the program waits for its deadline (TimedOut).
  workspaceDeletedFill: {
    language: 'python',
    code: [
      'import os, time',
      'held = []',
      'for i in range(20):',
      '    f = open("/workspace/d%d" % i, "wb")',
      '    os.unlink(f.name)',
      '    for _ in range(32):',
      '        f.write(b"x" * (1 << 20))',
      '        f.flush()',
      '    held.append(f)',
      'time.sleep(60)',
    ].join('\n'),
    timeout_seconds: 30,
    reason: 'DiskFull',
  },
  tmpFill: {
    language: 'python',
    code: 'with open("/tmp/fill", "wb") as f:\n    while True:\n        f.write(b"x" * (1 << 20))\n        f.flush()',
    timeout_seconds: 30,
    reason: 'DiskFull',
  },
} as const;

const text = (r: ToolResult): string => r.content.map((c) => c.text ?? '').join('\n');

async function runPodName(namespace: string, run: string): Promise<string> {
  let podName = '';
  await until(
    async () => {
      const o = (await k.custom.getNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: SANDBOXRUN_PLURAL, name: run })) as {
        status?: { phase?: string; podName?: string };
      };
      podName = o.status?.podName ?? '';
      return ['Succeeded', 'Failed', 'TimedOut'].includes(o.status?.phase ?? '');
    },
    15_000,
    `SandboxRun ${run} to record its result`,
  );
  return podName;
}

/** Runs one attack and checks what the user sees: the reason, a message that names the bound. */
async function attack(client: TestClient, name: keyof typeof ATTACKS): Promise<{ r: ToolResult; ms: number }> {
  const { reason, ...args } = ATTACKS[name];
  const t0 = performance.now();
  const r = await client.callTool('execute_code', args);
  const ms = Math.round(performance.now() - t0);
  // The call's time includes creating the pod; duration_ms is the code's own run in the sandbox.
  console.info(
    `hostile-bounds: ${name} ended as ${String(r.structuredContent?.reason ?? r.structuredContent?.phase)}: call ${ms} ms, run ${String(r.structuredContent?.duration_ms)} ms`,
  );
  if (name === 'bashForkBomb' && r.structuredContent?.phase === 'Succeeded') {
    expect(r.structuredContent.message, text(r)).toMatch(/It left \d+ processes running, killed when it exited/);
    return { r, ms };
  }
  expect(r.structuredContent?.reason, text(r)).toBe(reason);
  expect(r.isError).toBe(true);
  expect(r.structuredContent?.phase).toBe('Failed');
  if (reason === 'ProcessLimit') expect(text(r)).toMatch(/more processes than the sandbox allows/);
  if (name === 'workspaceFill') expect(text(r)).toMatch(/\/workspace reached its size limit \(64Mi\)/);
  if (name === 'workspaceFiles') expect(text(r)).toMatch(/\/workspace reached its size limit \(64Mi\).*holds at most 16384 of them/);
  if (name === 'workspaceHiddenFiles') expect(text(r)).toMatch(/a directory without read and search permission for its owner counts as full/);
  if (name === 'workspaceDeletedFill') expect(text(r)).toMatch(/files deleted while a process still has them open count until closed/);
  if (name === 'tmpFill') expect(text(r)).toMatch(/\/tmp reached its size limit \(16Mi\)/);
  return { r, ms };
}

function bounded(label: string, env: Record<string, string>, pooled: boolean): void {
  describe(label, () => {
    let ns = '';
    let op: RunningOperator;
    let client: TestClient;
    let benign: BenignNeighbour;

    beforeAll(async () => {
      ns = await createNamespace(k, pooled ? 'bounds-warm' : 'bounds-cold');
      op = await startOperator(ns, { ...LIMITS, ...env });
      client = await connect(op.url, 'current');
      benign = await startBenignNeighbour(op.url, { pauseMs: 200 });
    }, TEST_TIMEOUT_MS);
    afterAll(async () => {
      const report = await benign?.stop();
      await client?.close();
      await op?.stop();
      await deleteNamespace(k, ns);
      expect(report?.failures ?? ['the neighbour never started']).toEqual([]);
      expect(report?.calls ?? 0).toBeGreaterThan(0);
    }, TEST_TIMEOUT_MS);

    /** A pool pod is ready, so the next run is served warm. */
    const poolReady = async (): Promise<void> => {
      if (!pooled) return;
      await until(
        async () => {
          const pods = await k.core.listNamespacedPod({ namespace: ns, labelSelector: 'codemode.dev/pool=warm' });
          return pods.items.some((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
        },
        120_000,
        'a ready pool pod',
      );
    };
    const servedBy = async (r: ToolResult): Promise<void> => {
      const pod = await runPodName(ns, String(r.structuredContent?.run));
      if (pod !== '') expect(pod.startsWith('codemode-pool-')).toBe(pooled);
    };

    it.each(Object.keys(ATTACKS) as Array<keyof typeof ATTACKS>)(
      '%s ends with its bound as the reason',
      async (name) => {
        await poolReady();
        const { r } = await attack(client, name);
        await servedBy(r);
        // The sandbox is single-use: its pod (and everything left in it) goes away.
        await until(
          async () =>
            (await k.core.listNamespacedPod({ namespace: ns, labelSelector: 'codemode.dev/pool!=warm' })).items.filter(
              (p) => p.metadata?.labels?.['codemode.dev/run'] !== undefined && !p.metadata.deletionTimestamp,
            ).length === 0,
          60_000,
          'the run pods to be deleted',
        );
      },
      TEST_TIMEOUT_MS,
    );

    it(
      "a setsid escapee that keeps writing ends the run with the program's own exit code",
      async () => {
        await poolReady();
        const r = await client.callTool('execute_code', {
          language: 'bash',
          code: 'setsid yes >/dev/stdout &\nsleep 0.5\necho main\nexit 3',
          timeout_seconds: 20,
        });
        expect(r.structuredContent, text(r)).toMatchObject({ phase: 'Failed', reason: 'NonZeroExit', exit_code: 3 });
        await servedBy(r);
      },
      TEST_TIMEOUT_MS,
    );

    it(
      'a run after the attacks works normally',
      async () => {
        const r = await client.callTool('execute_code', { code: 'print(6 * 7)' });
        expect(r.structuredContent).toMatchObject({ phase: 'Succeeded', stdout: '42\n' });
      },
      TEST_TIMEOUT_MS,
    );
  });
}

bounded('resource bounds in cold runs', { CODEMODE_WARM_POOL_SIZE: '0' }, false);
bounded('resource bounds in warm runs', { CODEMODE_WARM_POOL_SIZE: '2' }, true);

describe('resource bounds in a session', () => {
  let ns = '';
  let op: RunningOperator;
  let client: TestClient;
  let benign: BenignNeighbour;

  beforeAll(async () => {
    ns = await createNamespace(k, 'bounds-session');
    op = await startOperator(ns, LIMITS);
    client = await connect(op.url, 'current');
    benign = await startBenignNeighbour(op.url, { pauseMs: 200 });
  }, TEST_TIMEOUT_MS);
  afterAll(async () => {
    const report = await benign?.stop();
    await client?.close();
    await op?.stop();
    await deleteNamespace(k, ns);
    expect(report?.failures ?? ['the neighbour never started']).toEqual([]);
  }, TEST_TIMEOUT_MS);

  const newSession = async (language: string): Promise<string> => {
    const created = await client.callTool('create_session', { language });
    expect(created.isError ?? false, text(created)).toBe(false);
    return String(created.structuredContent?.session);
  };

  it(
    'a fork bomb ends as ProcessLimit at the timeout, and the session lives on without it',
    async () => {
      const session = await newSession('python');
      const r = await client.callTool('execute_code', {
        session,
        code: 'import subprocess\nsubprocess.run(["bash", "-c", "f(){ f & f; }; f"])',
        timeout_seconds: 5,
      });
      expect(r.structuredContent?.reason, text(r)).toBe('ProcessLimit');
      expect(text(r)).toMatch(/more processes than the sandbox allows.*stopped at its timeout/);
      // Everything the bomb started was killed with the call: the next call can fork again.
      const next = await client.callTool('execute_code', {
        session,
        code: 'import os, subprocess\nsubprocess.run(["true"]).returncode, len([n for n in os.listdir("/proc") if n.isdigit()]) < 10',
      });
      expect(next.structuredContent, text(next)).toMatchObject({ phase: 'Succeeded', result: '(0, True)' });
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a fork bomb a node session call leaves running ends it as ProcessLimit, and the session lives on without it',
    async () => {
      const session = await newSession('node');
      // Started apart from the call, which ends on its own before its timeout: only the process
      // cap met during the call says what it left behind.
      const r = await client.callTool('execute_code', {
        session,
        // Besides the bomb (which burns out), sleepers orphaned to PID 1 that would hold the cap.
        code: "require('child_process').spawn('bash', ['-c', 'f(){ f & f; }; f & while :; do (sleep 60 &); done'], { stdio: 'ignore', detached: true }).unref()\nawait new Promise((r) => setTimeout(r, 3000))",
        timeout_seconds: 20,
      });
      expect(r.structuredContent?.reason, text(r)).toBe('ProcessLimit');
      expect(text(r)).toMatch(/more processes than the sandbox allows/);
      // Everything the bomb started was stopped and killed with the call, also the processes the
      // detached bash left to PID 1 (the pod's pause process), out of the kernel's tree: the
      // session lives on, can start a process, and only the pod's own processes are left.
      const next = await client.callTool('execute_code', {
        session,
        code: [
          "require('child_process').execFileSync('true')",
          "const fs = require('fs')",
          "const comm = (pid) => { try { return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim() } catch { return 'node' } }",
          "fs.readdirSync('/proc').filter((n) => /^\\d+$/.test(n)).map(comm).filter((c) => c !== 'pause' && c !== 'node')",
        ].join('\n'),
      });
      expect(next.structuredContent, text(next)).toMatchObject({ phase: 'Succeeded', result: '[]' });
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a node session call that holds the process cap while it first reads a file asynchronously ends as ProcessLimit, and the session lives on',
    async () => {
      const session = await newSession('node');
      // libuv creates its thread pool at the first asynchronous fs call and aborts the process when
      // it cannot: the kernel starts it before any code runs.
      const r = await client.callTool('execute_code', {
        session,
        code: [
          "const cp = require('child_process')",
          'const kids = []',
          "for (let i = 0; i < 200; i++) kids.push(cp.spawn('sleep', ['60'], { stdio: 'ignore' }).on('error', () => undefined))",
          'await new Promise((r) => setTimeout(r, 500))',
          "const name = await require('fs').promises.readFile('/etc/hostname', 'utf8')",
          "for (const k of kids) k.kill('SIGKILL')",
          'name.length',
        ].join('\n'),
        timeout_seconds: 20,
      });
      expect(r.structuredContent?.reason, text(r)).toBe('ProcessLimit');
      const next = await client.callTool('execute_code', { session, code: '1 + 1' });
      expect(next.structuredContent, text(next)).toMatchObject({ phase: 'Succeeded', result: '2' });
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a full /tmp ends a node session call as DiskFull, naming /tmp',
    async () => {
      const session = await newSession('node');
      const code = "const fs = require('fs')\nconst fd = fs.openSync('/tmp/fill', 'w')\nconst mb = Buffer.alloc(1 << 20)\nwhile (true) fs.writeSync(fd, mb)";
      const r = await client.callTool('execute_code', { session, code, timeout_seconds: 30 });
      expect(r.structuredContent?.reason, text(r)).toBe('DiskFull');
      expect(text(r)).toMatch(/\/tmp reached its size limit/);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a full /tmp ends the call as DiskFull, naming /tmp',
    async () => {
      const session = await newSession('python');
      const r = await client.callTool('execute_code', { session, code: ATTACKS.tmpFill.code, timeout_seconds: 30 });
      expect(r.structuredContent?.reason, text(r)).toBe('DiskFull');
      expect(text(r)).toMatch(/\/tmp reached its size limit/);
    },
    TEST_TIMEOUT_MS,
  );

  // /workspace on disk, past its limit (64Mi, each entry counting 4 KiB: 16,384 files): the
  // kernel's guard ends the session, whose files would use up the node's inodes otherwise.
  const LOST_TO_WORKSPACE =
    /^The session's \/workspace on the node's disk went over its size limit \((64Mi, )?each file or directory counting at least 4 KiB, open deleted files included, a directory it could not read as full\), so the interpreter was stopped and the session's files deleted: .*create a new session/;
  const emptyFiles = {
    python: 'import os\nn = 0\nwhile True:\n    os.close(os.open("/workspace/f%d" % n, os.O_CREAT | os.O_WRONLY))\n    n += 1',
    bash: 'i=0\nwhile :; do : > /workspace/f$i; i=$((i + 1)); done',
    // Synchronous: the loop holds the kernel's thread, so its watchdog thread ends the session.
    node: "const fs = require('fs')\nfor (let n = 0; ; n++) fs.closeSync(fs.openSync('/workspace/f' + n, 'w'))",
  };
  it.each(Object.entries(emptyFiles))(
    'a %s session call that creates empty files without end ends as DiskFull, and the session is lost',
    async (language, code) => {
      const session = await newSession(language);
      const r = await client.callTool('execute_code', { session, code, timeout_seconds: 60 });
      expect(r.structuredContent?.reason, text(r)).toBe('DiskFull');
      expect(String(r.structuredContent?.message)).toMatch(LOST_TO_WORKSPACE);
      // Well before its timeout, and the session says why it is gone.
      const next = await client.callTool('execute_code', { session, code: emptyFiles[language as keyof typeof emptyFiles] });
      expect(next.isError).toBe(true);
      expect(text(next)).toMatch(/is lost: .*\/workspace on the node's disk went over its size limit/);
    },
    TEST_TIMEOUT_MS,
  );

  // What the walk cannot see (above, workspaceHiddenFiles and workspaceDeletedFill) ends a session too.
  const hidden = {
    'python: files in a directory without read permission': ATTACKS.workspaceHiddenFiles.code,
    'node: files deleted while open': [
      "const fs = require('fs')",
      'const held = []',
      'for (let i = 0; i < 20; i++) {',
      "  const fd = fs.openSync('/workspace/d' + i, 'w')",
      "  fs.unlinkSync('/workspace/d' + i)",
      '  for (let j = 0; j < 32; j++) fs.writeSync(fd, Buffer.alloc(1 << 20, 120))',
      '  held.push(fd)',
      '}',
      'await new Promise((r) => setTimeout(r, 60000))',
    ].join('\n'),
  };
  it.each(Object.entries(hidden))(
    'a session call that hides what it writes (%s) ends as DiskFull, and the session is lost',
    async (what, code) => {
      const session = await newSession(what.split(':')[0] as string);
      const r = await client.callTool('execute_code', { session, code, timeout_seconds: 30 });
      expect(r.structuredContent?.reason, text(r)).toBe('DiskFull');
      expect(String(r.structuredContent?.message)).toMatch(LOST_TO_WORKSPACE);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a process a python session call left creating empty files ends the session between calls, which then says why',
    async () => {
      const session = await newSession('python');
      const r = await client.callTool('execute_code', {
        session,
        code: 'import subprocess\nsubprocess.Popen(["sh", "-c", "i=0; while :; do : > /workspace/f$i; i=$((i + 1)); done"], start_new_session=True)\n6 * 7',
      });
      expect(r.structuredContent, text(r)).toMatchObject({ phase: 'Succeeded', result: '42' });
      let last: ToolResult | undefined;
      await until(
        async () => {
          last = await client.callTool('execute_code', { session, code: '1' });
          return last.isError === true;
        },
        60_000,
        'the session to be ended for its /workspace',
      );
      // The call that found the kernel gone reads why from the pod; a later one, from the session's status.
      expect(text(last as ToolResult)).toMatch(
        /\/workspace on the node's disk went over its size limit \(64Mi, each file or directory counting at least 4 KiB, open deleted files included/,
      );
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a memory bomb in the interpreter ends as OOMKilled, and the session is lost',
    async () => {
      const session = await newSession('python');
      const r = await client.callTool('execute_code', { session, code: 'x = b"x" * (2 << 30)', timeout_seconds: 30 });
      expect(r.structuredContent?.reason, text(r)).toBe('OOMKilled');
      expect(String(r.structuredContent?.message)).toMatch(
        /interpreter used more memory than its limit \(\d+[MG]i\) and was killed; files in \/tmp count as memory.*create a new session/,
      );
      expect(text(r)).toMatch(/ran out of memory/);
    },
    TEST_TIMEOUT_MS,
  );
});

// A container-level OOM on the warm path: /tmp (a tmpfs, its pages charged to the container's
// memory) allowed to grow past the memory limit, filled by a program that itself stays small.
// The OOM killer then takes the largest process, the kernel: the container stops and the stream
// ends without a result. The pod's status says OOMKilled, and so must the run (before issue 14:
// ExecFailed, "the kernel relay exited").
/**
 * An operator of its own, in a new namespace, for the enclosing describe, and an MCP client of it
 * (both set once its beforeAll ran; stopped and deleted after its tests).
 */
function ownOperator(prefix: string, env: Record<string, string>): { ns: string; client: TestClient } {
  const own = { ns: '' } as { ns: string; client: TestClient; op?: RunningOperator };
  beforeAll(async () => {
    own.ns = await createNamespace(k, prefix);
    own.op = await startOperator(own.ns, env);
    own.client = await connect(own.op.url, 'current');
  }, TEST_TIMEOUT_MS);
  afterAll(async () => {
    await own.client?.close();
    await own.op?.stop();
    if (own.ns) await deleteNamespace(k, own.ns);
  }, TEST_TIMEOUT_MS);
  return own;
}

describe('a container-level OOM kill on the warm path', () => {
  const own = ownOperator('bounds-oom', {
    ...LIMITS,
    CODEMODE_WARM_POOL_SIZE: '1',
    CODEMODE_DEFAULT_MEMORY: '128Mi',
    CODEMODE_MEMORY_REQUEST: '64Mi',
    CODEMODE_TMP_SIZE_LIMIT: '512Mi',
  });

  it(
    'ends as OOMKilled when the kernel itself is killed',
    async () => {
      await until(
        async () => {
          const pods = await k.core.listNamespacedPod({ namespace: own.ns, labelSelector: 'codemode.dev/pool=warm' });
          return pods.items.some((p) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
        },
        120_000,
        'a ready pool pod',
      );
      const r = await own.client.callTool('execute_code', { code: ATTACKS.tmpFill.code, timeout_seconds: 30 });
      expect(r.structuredContent?.reason, text(r)).toBe('OOMKilled');
      const pod = await runPodName(own.ns, String(r.structuredContent?.run));
      if (pod !== '') expect(pod.startsWith('codemode-pool-')).toBe(true);
    },
    TEST_TIMEOUT_MS,
  );
});

// CODEMODE_WORKSPACE_MEDIUM=Memory: /workspace is a tmpfs of its size limit, so a write past it
// fails at once (DiskFull, in every path that reports it: a run's kernel, the runner of an image
// without our kernel, a session), and files and their inodes are charged to the memory limit
// instead of the node's disk: an empty-file loop ends at the memory limit, not at the node's
// inodes (on disk nothing bounds it: README *Install in a cluster*).
describe('a /workspace in memory', () => {
  const own = ownOperator('bounds-memws', {
    ...LIMITS,
    CODEMODE_WORKSPACE_MEDIUM: 'Memory',
    CODEMODE_WARM_POOL_SIZE: '0',
    // sh runs in an image without our kernel: the runner reports how they ended.
    CODEMODE_IMAGE_SH: 'codemode.local/datascience:v1',
  });

  it(
    'is a tmpfs of the size limit',
    async () => {
      const r = await own.client.callTool('execute_code', { language: 'bash', code: 'stat -f -c %T /workspace; df -k /workspace | tail -n 1' });
      expect(r.structuredContent?.phase, text(r)).toBe('Succeeded');
      const [fs, df] = String(r.structuredContent?.stdout).trim().split('\n');
      expect(fs).toBe('tmpfs');
      expect(Number(df?.trim().split(/\s+/)[1])).toBe(64 * 1024);
    },
    TEST_TIMEOUT_MS,
  );

  it.each([
    ['a python run (its kernel reports)', { ...ATTACKS.workspaceFill }],
    [
      'an sh run in an image without our kernel (the runner reports)',
      { language: 'sh', code: 'exec dd if=/dev/zero of=/workspace/fill bs=1M', timeout_seconds: 30 },
    ],
  ])(
    'ends %s that fills it as DiskFull, naming /workspace',
    async (_n, { language, code, timeout_seconds }) => {
      const r = await own.client.callTool('execute_code', { language, code, timeout_seconds });
      expect(r.structuredContent?.reason, text(r)).toBe('DiskFull');
      expect(text(r)).toMatch(/\/workspace reached its size limit \(64Mi\)/);
    },
    TEST_TIMEOUT_MS,
  );

  it.each([
    ['python', ATTACKS.workspaceFill.code, 'import os\nos.remove("/workspace/fill")\n6 * 7'],
    [
      'node',
      "const fs = require('fs')\nconst fd = fs.openSync('/workspace/fill', 'w')\nconst mb = Buffer.alloc(1 << 20)\nwhile (true) fs.writeSync(fd, mb)",
      "require('fs').unlinkSync('/workspace/fill')\n6 * 7",
    ],
  ])(
    'ends a %s session call that fills it as DiskFull, naming /workspace, and the session lives on',
    async (language, code, cleanUp) => {
      const created = await own.client.callTool('create_session', { language });
      const session = String(created.structuredContent?.session);
      const r = await own.client.callTool('execute_code', { session, code, timeout_seconds: 30 });
      expect(r.structuredContent?.reason, text(r)).toBe('DiskFull');
      expect(text(r)).toMatch(/\/workspace reached its size limit/);
      const next = await own.client.callTool('execute_code', { session, code: cleanUp });
      expect(next.structuredContent, text(next)).toMatchObject({ phase: 'Succeeded', result: '42' });
    },
    TEST_TIMEOUT_MS,
  );

  // A session's interpreter killed with its pod: the message is read from the pod (its limit, its
  // volumes in memory), and the session is lost.
  it.each([
    ['a run', false, /^The program used more memory than its limit \(\d+[MG]i\) and was killed; files in \/tmp and \/workspace count as memory/],
    [
      'a session call',
      true,
      /^The session's interpreter used more memory than its limit \(\d+[MG]i\) and was killed; files in \/tmp and \/workspace count as memory\. The session is lost/,
    ],
  ])(
    'charges empty files to the memory limit: a loop creating them ends %s OOMKilled',
    async (_n, inSession, message) => {
      const code = 'import os\nn = 0\nwhile True:\n    os.close(os.open("/workspace/f%d" % n, os.O_CREAT | os.O_WRONLY))\n    n += 1';
      const session = inSession ? String((await own.client.callTool('create_session', { language: 'python' })).structuredContent?.session) : undefined;
      const r = await own.client.callTool('execute_code', { code, timeout_seconds: 60, ...(session !== undefined && { session }) });
      expect(r.structuredContent?.reason, text(r)).toBe('OOMKilled');
      expect(String(r.structuredContent?.message)).toMatch(message);
      expect(text(r)).toMatch(/^The run was killed because it ran out of memory \(OOMKilled\)\. The (program|session's interpreter) used more memory/);
    },
    TEST_TIMEOUT_MS,
  );
});

// A /workspace on disk in an image without our kernel: the runner's own watcher (du for the bytes,
// find for the entries) stops a program past either, as the kernel's walk does above.
describe('a /workspace on disk, the runner reporting', () => {
  const own = ownOperator('bounds-runner-ws', { ...LIMITS, CODEMODE_WARM_POOL_SIZE: '0', CODEMODE_IMAGE_SH: 'codemode.local/datascience:v1' });

  it.each([
    ['bytes', 'exec dd if=/dev/zero of=/workspace/fill bs=1M', /\/workspace reached its size limit \(64Mi\)/],
    ['empty files', 'i=0\nwhile :; do : > /workspace/f$i; i=$((i + 1)); done', /\/workspace reached its size limit \(64Mi\).*holds at most 16384 of them/],
    [
      'files in a directory without read permission',
      'mkdir -m 300 /workspace/d\ni=0\nwhile :; do : > /workspace/d/f$i; i=$((i + 1)); done',
      /a directory without read and search permission for its owner counts as full/,
    ],
    [
      'files deleted while open',
      'for i in 3 4 5 6 7 8 9; do eval "exec $i>/workspace/d$i"; rm /workspace/d$i; dd if=/dev/zero bs=1M count=32 >&$i 2>/dev/null; done\nsleep 60',
      /files deleted while a process still has them open count until closed/,
    ],
  ])(
    'stops an sh program past its limit in %s as DiskFull',
    async (_n, code, message) => {
      const r = await own.client.callTool('execute_code', { language: 'sh', code, timeout_seconds: 30 });
      expect(r.structuredContent?.reason, text(r)).toBe('DiskFull');
      expect(text(r)).toMatch(message);
      // Stopped by the watcher, not by its deadline.
      expect(Number(r.structuredContent?.duration_ms)).toBeLessThan(30_000);
    },
    TEST_TIMEOUT_MS,
  );
});

// The runner path (an image without our kernel) reports how the program ended in a trailer on
// stderr, told apart by a nonce. The program runs as the runner's user and can read that nonce
// (the runner's command line) and print a trailer of its own, then kill the runner so the real
// one never comes: what it forges must still end as a recorded, terminal run.
describe('a program that forges the runner trailer', () => {
  const own = ownOperator('hostile-trailer', { CODEMODE_WARM_POOL_SIZE: '0', CODEMODE_IMAGE_SH: 'codemode.local/datascience:v1' });
  /** Finds the runner (the program's grandparent), prints its nonce with `code`, kills it. */
  const forge = (code: string): string =>
    [
      'p=$(cut -d" " -f4 /proc/$PPID/stat)',
      'n=$(tr "\\0" "\\n" < /proc/$p/cmdline | tail -n 1)',
      `printf '\\036%s ${code} 0 0 0 - 0\\n' "$n" >&2`,
      'kill -9 $p $PPID',
    ].join('\n');

  it.each([
    ['an exit code no process has (past int64: the API server would refuse the status)', '99999999999999999999'],
    ['an exit code past 255', '4096'],
  ])(
    'with %s is recorded as a failed run',
    async (_what, code) => {
      const r = await own.client.callTool('execute_code', { language: 'sh', code: forge(code), timeout_seconds: 20 });
      const sc = r.structuredContent ?? {};
      expect(sc.phase, text(r)).toBe('Failed');
      expect(text(r)).not.toMatch(/validation/i);
      expect(sc.exit_code === undefined || (Number(sc.exit_code) >= 0 && Number(sc.exit_code) <= 255), text(r)).toBe(true);
      // Stored (after the reply): terminal, so its TTL runs and no replica decides it again. On
      // the code before, the status was refused and the run stayed Running for good.
      let status: { phase?: string; completionTime?: string; exitCode?: number } | undefined;
      await until(
        async () => {
          const run = (await k.custom.getNamespacedCustomObject({
            group: GROUP,
            version: VERSION,
            namespace: own.ns,
            plural: SANDBOXRUN_PLURAL,
            name: String(sc.run),
          })) as {
            status?: typeof status;
          };
          status = run.status;
          return status?.completionTime !== undefined;
        },
        60_000,
        'the run recorded as finished',
      );
      expect(status).toMatchObject({ phase: 'Failed', completionTime: expect.any(String) });
      expect(String(status?.exitCode ?? 0)).not.toBe(code);
    },
    TEST_TIMEOUT_MS,
  );
});
