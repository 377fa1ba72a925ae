// What code inside a sandbox can and cannot do, observed from inside a real sandbox pod created
// by the operator: read-only root, writable /workspace and /tmp, no service-account token, no
// capabilities, non-root, and no network (data from a server pod the test started never arrives).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNamespace, deleteNamespace, execCapture, runPod, simplePod, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator, type TestClient } from './helpers/operator.js';

const k = testKube();
let ns = '';
let op: RunningOperator;
let mcp: TestClient;

beforeAll(async () => {
  ns = await createNamespace(k, 'security');
  // sh runs in another image, so its cold runs take the runner script (a pod that sleeps) rather
  // than a kernel: both ways code starts are seen.
  op = await startOperator(ns, { CODEMODE_IMAGE_SH: 'codemode.local/datascience:v1' });
  mcp = await connect(op.url, 'current');
});
afterAll(async () => {
  await mcp?.close();
  await op?.stop();
  await deleteNamespace(k, ns);
});

async function py(code: string): Promise<{ stdout: string; stderr: string }> {
  const r = await mcp.callTool('execute_code', { code, language: 'python', timeout_seconds: 20 });
  const s = r.structuredContent as { phase: string; stdout?: string; stderr?: string };
  expect(s.phase, s.stderr).toBe('Succeeded');
  return { stdout: s.stdout ?? '', stderr: s.stderr ?? '' };
}

describe('inside a sandbox', () => {
  it('cannot write the root filesystem but can write /workspace and /tmp', async () => {
    const { stdout } = await py(
      [
        'import os',
        'def attempt(path):',
        '    try:',
        '        open(path, "w").write("x"); return "ok"',
        '    except OSError as e:',
        '        return type(e).__name__',
        'print(attempt("/evil"), attempt("/usr/evil"), attempt("/workspace/f"), attempt("/tmp/f"), os.getcwd())',
      ].join('\n'),
    );
    expect(stdout.trim().split(' ')).toEqual([expect.stringMatching(/Error/), expect.stringMatching(/Error/), 'ok', 'ok', '/workspace']);
  });

  it('runs as a user of its own (group 65534) with no capabilities, no privilege escalation and no token', async () => {
    const { stdout } = await py(
      [
        'import os',
        'status = dict(l.split(":\\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\\t" in l)',
        'print(os.getuid(), os.getgid(), status["CapEff"].strip(), status["NoNewPrivs"].strip(), status["Seccomp"].strip())',
        'print(os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount"))',
        'print(sorted(k for k in os.environ if k.endswith("_SERVICE_HOST")))',
      ].join('\n'),
    );
    const [ids, token, services] = stdout.trim().split('\n');
    const [uid, ...rest] = (ids ?? '').split(' ');
    expect(Number(uid)).toBeGreaterThanOrEqual(2 ** 30);
    expect(rest.join(' ')).toBe('65534 0000000000000000 1 2');
    expect(token).toBe('False');
    // Kubernetes always injects the API server's address (enableServiceLinks=false removes the
    // rest); the egress policy makes it unreachable, see below.
    expect(services).toBe("['KUBERNETES_SERVICE_HOST']");
  });

  it('cannot fetch data from a server pod that other pods can reach', async () => {
    const payload = `secret-${Date.now()}`;
    const server = await runPod(
      k,
      ns,
      simplePod('server', ['sh', '-c', `mkdir -p /tmp/www && echo ${payload} > /tmp/www/data && cd /tmp/www && exec python3 -m http.server 8080`]),
    );
    const url = `http://${server.status?.podIP}:8080/data`;
    const fetchCode = `import urllib.request\ntry:\n    print(urllib.request.urlopen("${url}", timeout=5).read().decode().strip())\nexcept Exception as e:\n    print("FAILED", type(e).__name__)`;
    // Control: an ordinary pod in the same namespace gets the data, so the server is reachable.
    await runPod(k, ns, simplePod('control', ['sleep', 'infinity']));
    await until(async () => (await execCapture(k, ns, 'control', ['python3', '-c', fetchCode])).stdout.trim() === payload, 30_000, 'control pod fetch');
    const { stdout } = await py(fetchCode);
    expect(stdout).not.toContain(payload);
    expect(stdout).toMatch(/^FAILED/);
    const api = await py(
      'import os, socket\ns = socket.socket()\ns.settimeout(3)\ntry:\n    s.connect((os.environ["KUBERNETES_SERVICE_HOST"], int(os.environ["KUBERNETES_SERVICE_PORT"])))\n    s.sendall(b"GET /version HTTP/1.0\\r\\n\\r\\n")\n    print("GOT", s.recv(100))\nexcept Exception as e:\n    print("FAILED", type(e).__name__)',
    );
    expect(api.stdout).toMatch(/^FAILED/);
  });
});

// The node's disk outside every limit: the kubelet keeps a container's termination-message file
// (0666, in no ephemeral-storage limit) and its log (through /proc/<pid>/fd/1 of the container's
// main process) there. Each way code starts: a cold run's runner, and the kernels of sessions (a
// pool pod's kernel is started the same way).
const LIMIT = 513 * 1024 * 1024; // a MiB past the larger of /workspace (512Mi) and /tmp (128Mi), the defaults
const SHELL_PROBE = [
  'echo "$(ulimit -S -f) $(ulimit -H -f)"',
  'attempt() { if eval "$1" 2>/dev/null; then echo ok; else echo failed; fi; }',
  `echo "$(attempt 'head -c 1 /dev/zero | dd of=/workspace/sparse bs=1 seek=${LIMIT - 1} status=none') $(attempt 'head -c 1 /dev/zero | dd of=/workspace/sparse bs=1 seek=${LIMIT} status=none')"`,
  '(ulimit -f unlimited 2>/dev/null) && echo raised || echo refused',
  'echo "$(attempt "true >> /root/codemode-termination-log") $(attempt "true >> /dev/termination-log")"',
  'rm -f /workspace/sparse',
].join('\n');
const PROBES = {
  python: [
    'import errno, os, resource',
    'def attempt(f):',
    '    try:',
    '        f(); return "ok"',
    '    except OSError as e:',
    '        return errno.errorcode[e.errno]',
    '    except ValueError:',
    '        return "refused"',
    'def write_at(offset):',
    '    fd = os.open("/workspace/sparse", os.O_WRONLY | os.O_CREAT)',
    '    try:',
    '        os.pwrite(fd, b"x", offset)',
    '    finally:',
    '        os.close(fd)',
    'print(*resource.getrlimit(resource.RLIMIT_FSIZE))',
    `print(attempt(lambda: write_at(${LIMIT - 1})), attempt(lambda: write_at(${LIMIT})))`,
    'print(attempt(lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))))',
    'print(attempt(lambda: open("/root/codemode-termination-log", "a")), attempt(lambda: open("/dev/termination-log", "a")))',
    'os.remove("/workspace/sparse")',
  ].join('\n'),
  node: [
    "const fs = require('fs');",
    "const attempt = (f) => { try { f(); return 'ok'; } catch (e) { return e.code; } };",
    "const writeAt = (offset) => { const fd = fs.openSync('/workspace/sparse', 'w'); try { fs.writeSync(fd, 'x', offset); } finally { fs.closeSync(fd); } };",
    "const limits = fs.readFileSync('/proc/self/limits', 'utf8').split('\\n').find((l) => l.startsWith('Max file size')).split(/\\s+/);",
    'console.log(limits[3], limits[4]);',
    `console.log(attempt(() => writeAt(${LIMIT - 1})), attempt(() => writeAt(${LIMIT})));`,
    // Node cannot set limits; a shell it starts tries (it inherits them).
    "console.log(require('child_process').execSync('(ulimit -f unlimited) 2>/dev/null && echo raised || echo refused').toString().trim());",
    "console.log(attempt(() => fs.openSync('/root/codemode-termination-log', 'a')), attempt(() => fs.openSync('/dev/termination-log', 'a')));",
    "fs.rmSync('/workspace/sparse');",
  ].join('\n'),
  bash: SHELL_PROBE,
  sh: SHELL_PROBE,
};
const EXPECTED = {
  python: [`${LIMIT} ${LIMIT}`, 'ok EFBIG', 'refused', 'EACCES EACCES'],
  node: [`${LIMIT} ${LIMIT}`, 'ok EFBIG', 'refused', 'EACCES EACCES'],
  // bash counts in 1024-byte blocks; dd is killed by SIGXFSZ (failed)
  bash: [`${LIMIT / 1024} ${LIMIT / 1024}`, 'ok failed', 'refused', 'failed failed'],
  // dash counts in 512-byte blocks
  sh: [`${LIMIT / 512} ${LIMIT / 512}`, 'ok failed', 'refused', 'failed failed'],
};

// The core-dump limit (soft, hard) and whether code can raise it.
const CORE_SHELL = 'echo "$(ulimit -S -c) $(ulimit -H -c) $( (ulimit -c unlimited) 2>/dev/null && echo raised || echo refused)"';
const CORE_PROBE = {
  python: [
    'import resource',
    'try:',
    '    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)); r = "raised"',
    'except ValueError:',
    '    r = "refused"',
    'print(*resource.getrlimit(resource.RLIMIT_CORE), r)',
  ].join('\n'),
  node: [
    "const limits = require('fs').readFileSync('/proc/self/limits', 'utf8').split('\\n').find((l) => l.startsWith('Max core file size')).split(/\\s+/);",
    "console.log(limits[4], limits[5], require('child_process').execSync('(ulimit -c unlimited) 2>/dev/null && echo raised || echo refused').toString().trim());",
  ].join('\n'),
  bash: CORE_SHELL,
  sh: CORE_SHELL,
};

const PRINT_ONE = { python: 'print(1)', node: 'console.log(1)', bash: 'echo 1', sh: 'echo 1' };
type ProbeLanguage = keyof typeof PRINT_ONE;

/**
 * Runs `code[language]` as a cold run (every language: sh's runs in another image, in a pod that
 * sleeps) or in a new session of each language that has one, each expected to succeed; then
 * `check(language, stdout, session)`.
 */
async function inEachLanguage(
  how: 'cold run' | 'session',
  code: Record<ProbeLanguage, string>,
  check: (language: ProbeLanguage, stdout: string, session: string | undefined) => Promise<void> | void,
): Promise<void> {
  for (const language of how === 'session' ? (['python', 'node', 'bash'] as const) : (['python', 'node', 'bash', 'sh'] as const)) {
    const session = how === 'session' ? await newSession(language) : undefined;
    const r = await mcp.callTool('execute_code', { code: code[language], language, timeout_seconds: 20, ...(session && { session }) });
    const s = r.structuredContent as { phase: string; stdout?: string; stderr?: string };
    expect(s.phase, `${language}: ${s.stderr}`).toBe('Succeeded');
    await check(language, s.stdout ?? '', session);
  }
}

describe("the node's disk, outside the sandbox's limits", () => {
  it.each(['cold run', 'session'] as const)('a %s: no file past the file limit, which code cannot raise; no termination-message file', async (how) => {
    await inEachLanguage(how, PROBES, async (language, stdout, session) => {
      expect(stdout.trim().split('\n'), language).toEqual(EXPECTED[language]);
      if (session) {
        // The session lives on: a write past the limit did not end its kernel.
        const again = await mcp.callTool('execute_code', { code: PRINT_ONE[language], session });
        expect((again.structuredContent as { stdout?: string }).stdout?.trim(), language).toBe('1');
      }
    });
  });

  // A crash's core dump: with a program in the node's core_pattern (systemd-coredump, apport) it
  // is written by a root process of the node, outside the pod's limits, with the sandbox's memory.
  it.each(['cold run', 'session'] as const)('a %s: no core dumps, and code cannot turn them on', async (how) => {
    await inEachLanguage(how, CORE_PROBE, (language, stdout) => {
      expect(stdout.trim(), language).toBe('0 0 refused');
    });
  });

  it("a cold run's pod that sleeps (the runner's) has its output on /dev/null, not the container log", async () => {
    const r = await mcp.callTool('execute_code', {
      language: 'sh',
      code: 'for p in /proc/[0-9]*; do [ "$(tr "\\0" " " < $p/cmdline 2>/dev/null)" = "sleep infinity " ] && echo "$(readlink $p/fd/1) $(readlink $p/fd/2)"; done',
    });
    expect((r.structuredContent as { stdout?: string }).stdout).toBe('/dev/null /dev/null\n');
  });

  // Code in a session kernel's own process holds the kernel's log descriptor (Python: the kernel's
  // LOG_FD; Node: fd 2). The container log it was is written by the container runtime to the
  // node's disk, outside the pod's limits: ~200 MB/s until the kubelet evicted the pod.
  it.each([
    [
      'python',
      "import sys, os\nfd = next(m for m in list(sys.modules.values()) if hasattr(m, 'LOG_FD')).LOG_FD\nfor _ in range(8):\n    os.write(fd, b'x' * (1 << 20))\nprint(os.readlink(f'/proc/self/fd/{fd}'))",
    ],
    ['node', "const fs = require('fs')\nfor (let i = 0; i < 8; i++) fs.writeSync(2, 'x'.repeat(1 << 20))\nconsole.log(fs.readlinkSync('/proc/self/fd/2'))"],
  ])("a %s session kernel's log descriptor is a file in the pod's /tmp, not the container log", async (language, code) => {
    const session = await newSession(language);
    const r = await mcp.callTool('execute_code', { session, code, timeout_seconds: 30 });
    const s = r.structuredContent as { phase: string; stdout?: string; stderr?: string };
    expect(s.phase, s.stderr).toBe('Succeeded');
    expect(s.stdout?.trim()).toBe('/tmp/.codemode/kernel.log');
    const pods = await k.core.listNamespacedPod({ namespace: ns, labelSelector: `codemode.dev/session=${session}` });
    const pod = pods.items[0]?.metadata?.name ?? '';
    const containerLog = await k.core.readNamespacedPodLog({ name: pod, namespace: ns, container: 'sandbox' });
    expect(containerLog.length).toBeLessThan(1024);
    // The kernel's own lines are in the file, with what the code wrote.
    const again = await mcp.callTool('execute_code', {
      session,
      language,
      code:
        language === 'python'
          ? "print(os.path.getsize('/tmp/.codemode/kernel.log') > 8 << 20, 'Started kernel' in open('/tmp/.codemode/kernel.log', errors='replace').read(4096))"
          : "const t = fs.readFileSync('/tmp/.codemode/kernel.log', 'latin1')\nconsole.log(t.length > 8 << 20, t.slice(0, 4096).includes('Started kernel'))",
    });
    expect((again.structuredContent as { stdout?: string }).stdout?.trim()).toMatch(/^(True True|true true)$/);
  });
});

async function newSession(language: string): Promise<string> {
  const r = await mcp.callTool('create_session', { language });
  const s = r.structuredContent as { session?: string; phase?: string };
  expect(s.phase, JSON.stringify(r.content)).toBe('Ready');
  return String(s.session);
}

// The pod's own user (its uid is in no image's /etc/passwd) is looked up by name: the container's
// command writes its passwd line in /tmp and the images read it (libnss-extrausers). Without it
// whoami, Python's pwd and Node's os.userInfo() fail ("no such user"). sh runs in the
// data-science image here, the others in the sandbox image.
const WHO_AM_I = {
  python:
    "import os, pwd, getpass\np = pwd.getpwuid(os.getuid())\nprint(p.pw_name, p.pw_uid == os.getuid(), p.pw_dir, getpass.getuser(), os.path.expanduser('~sandbox'))",
  node: "const os = require('os')\nconst u = os.userInfo()\nconsole.log(u.username, u.uid === process.getuid(), u.homedir, process.env.USER, require('child_process').execFileSync('whoami').toString().trim())",
  bash: 'echo "$(whoami) $([ "$(id -u)" = "$(getent passwd sandbox | cut -d: -f3)" ] && echo True) $(getent passwd "$(id -u)" | cut -d: -f6) $(id -un) $(echo ~sandbox)"',
  sh: 'echo "$(whoami) $([ "$(id -u)" = "$(getent passwd sandbox | cut -d: -f3)" ] && echo True) $(getent passwd "$(id -u)" | cut -d: -f6) $(id -un) $(echo ~sandbox)"',
};

describe("the sandbox's user by name", () => {
  it.each(['cold run', 'session'] as const)('a %s: whoami, getpwuid and ~ find it', async (how) => {
    await inEachLanguage(how, WHO_AM_I, (language, stdout) => {
      expect(stdout.trim(), language).toBe(language === 'node' ? 'sandbox true /workspace sandbox sandbox' : 'sandbox True /workspace sandbox /workspace');
    });
  });
});

describe('what the kernel counts per user across the node', () => {
  // inotify instances (128 per user), message queue bytes and pipe pages are counted per user,
  // node-wide: with one user for every sandbox, one sandbox holding its 128 inotify instances
  // made inotify_init fail in all the others.
  it("one session holding every inotify instance its user may have leaves another session's alone", async () => {
    const hog = await newSession('python');
    const other = await newSession('python');
    const init = 'import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n';
    const held = await mcp.callTool('execute_code', {
      session: hog,
      code: `${init}fds = []\nwhile len(fds) < 1000:\n    fd = libc.inotify_init()\n    if fd < 0:\n        break\n    fds.append(fd)\nprint(len(fds), os.getuid())`,
    });
    const [count, hogUid] = String((held.structuredContent as { stdout?: string }).stdout)
      .trim()
      .split(' ');
    expect(Number(count)).toBeGreaterThan(0);
    expect(Number(count)).toBeLessThan(1000); // the per-user limit was met
    const probe = await mcp.callTool('execute_code', { session: other, code: `${init}fd = libc.inotify_init()\nprint(fd >= 0, os.getuid())` });
    const [ok, otherUid] = String((probe.structuredContent as { stdout?: string }).stdout)
      .trim()
      .split(' ');
    expect(otherUid).not.toBe(hogUid);
    expect(ok).toBe('True');
  });
});
