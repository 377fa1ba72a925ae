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
  op = await startOperator(ns);
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

  it('runs as uid 65534 with no capabilities, no privilege escalation and no token', async () => {
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
    expect(ids).toBe('65534 65534 0000000000000000 1 2');
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
