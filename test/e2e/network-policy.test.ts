// The sandbox NetworkPolicy is an owned object, on the real cluster: deleted or edited, it comes
// back with the same spec; and while a loop keeps deleting and editing it, no sandbox started
// meanwhile (cold, warm, in a session) exchanges a byte with the API server or another pod, and a
// benign neighbour's calls stay correct.
import type { V1NetworkPolicy } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GROUP, SANDBOXRUN_PLURAL, SANDBOXSESSION_PLURAL, VERSION, type SandboxRun, type SandboxSession } from '../../src/api/v1alpha1/index.js';
import { SANDBOX_CONTAINER } from '../../src/sandbox/pod.js';
import { SANDBOX_NETWORK_POLICY_NAME } from '../../src/sandbox/networkpolicy.js';
import { startBenignNeighbour } from './helpers/benign.js';
import { createNamespace, deleteNamespace, execCapture, runPod, simplePod, testKube, until } from './helpers/kube.js';
import { connect, startOperator, type RunningOperator, type TestClient } from './helpers/operator.js';

const k = testKube();
let ns = '';
let op: RunningOperator;
let mcp: TestClient;
/** The policy as the operator first created it. */
let original: V1NetworkPolicy;
const name = SANDBOX_NETWORK_POLICY_NAME;

beforeAll(async () => {
  ns = await createNamespace(k, 'netpol');
  // Small CPU requests: the shared test node is often full of other suites' pods.
  op = await startOperator(ns, { CODEMODE_WARM_POOL_SIZE: '2', CODEMODE_CPU_REQUEST: '10m' });
  mcp = await connect(op.url, 'current');
  await until(async () => (await read()) !== undefined, 30_000, 'the operator to create the NetworkPolicy');
  original = (await read()) as V1NetworkPolicy;
});
afterAll(async () => {
  await mcp?.close();
  await op?.stop();
  await deleteNamespace(k, ns);
});

async function read(): Promise<V1NetworkPolicy | undefined> {
  try {
    return await k.networking.readNamespacedNetworkPolicy({ namespace: ns, name });
  } catch {
    return undefined;
  }
}

/** The spec as JSON, without the undefined fields the client's deserializer adds. */
const specJson = (p: V1NetworkPolicy | undefined): string => JSON.stringify(p?.spec ?? null);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Waits until the policy has `want`'s spec and labels again, in an object other than `not`. */
async function restoredFrom(want: V1NetworkPolicy, not: { uid?: string; resourceVersion?: string }): Promise<V1NetworkPolicy> {
  let got: V1NetworkPolicy | undefined;
  await until(
    async () => {
      got = await read();
      const other = not.uid ? got?.metadata?.uid !== not.uid : !not.resourceVersion || got?.metadata?.resourceVersion !== not.resourceVersion;
      return got !== undefined && other && specJson(got) === specJson(want) && JSON.stringify(got.metadata?.labels) === JSON.stringify(want.metadata?.labels);
    },
    30_000,
    'the NetworkPolicy to be restored',
  );
  return got as V1NetworkPolicy;
}

type Edit = (p: V1NetworkPolicy) => V1NetworkPolicy;
const edits: Array<[string, Edit]> = [
  ['an allow-all egress rule added', (p) => ({ ...p, spec: { ...p.spec, podSelector: p.spec?.podSelector ?? {}, egress: [{}] } })],
  ['its podSelector changed', (p) => ({ ...p, spec: { ...p.spec, podSelector: { matchLabels: { 'codemode.dev/sandbox': 'nobody' } } } })],
  ['its label removed', (p) => ({ ...p, metadata: { ...p.metadata, labels: {} } })],
];

async function edit(change: Edit): Promise<V1NetworkPolicy | undefined> {
  const current = await read();
  if (!current) return undefined;
  return k.networking.replaceNamespacedNetworkPolicy({ namespace: ns, name, body: change(current) }).catch(() => undefined);
}

describe('the sandbox NetworkPolicy', () => {
  it('is recreated with the same spec after it is deleted', async () => {
    const before = (await read()) as V1NetworkPolicy;
    await k.networking.deleteNamespacedNetworkPolicy({ namespace: ns, name });
    const after = await restoredFrom(before, { uid: before.metadata?.uid });
    expect(after.spec).toEqual(before.spec);
  });

  it.each(edits)('is restored after %s', async (_what, change) => {
    const before = (await read()) as V1NetworkPolicy;
    const edited = await edit(change);
    expect(edited, 'the edit was accepted').toBeDefined();
    expect(specJson(edited) !== specJson(before) || JSON.stringify(edited?.metadata?.labels) !== JSON.stringify(before.metadata?.labels)).toBe(true);
    const after = await restoredFrom(before, { resourceVersion: edited?.metadata?.resourceVersion });
    expect(after.spec).toEqual(before.spec);
  });
});

// After a restore the gate waits a fixed settling time for the CNI; on a loaded node kube-router can
// take longer, so for a while after a restore every kernel call first checks in its pod that the
// pod has no network ("netcheck"). A second policy that allows all egress stands in for a CNI that
// has not caught up: the gate sees its own policy in place, the pod can still reach the API server.
describe('a call soon after the policy was restored, in a pod that still has network', () => {
  it('is not run (session and warm run), says why, and the session keeps its state', { timeout: 180_000 }, async () => {
    const created = await mcp.callTool('create_session', { language: 'python' });
    const session = String(created.structuredContent?.session ?? '');
    expect(created.isError ?? false, JSON.stringify(created.content)).toBe(false);
    expect((await mcp.callTool('execute_code', { session, code: 'x = 41' })).isError ?? false).toBe(false);
    const podName = String(
      (
        (await op.clients.custom.getNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: ns,
          plural: SANDBOXSESSION_PLURAL,
          name: session,
        })) as SandboxSession
      ).status?.podName,
    );
    const apiIp = (await k.core.readNamespacedService({ namespace: 'default', name: 'kubernetes' })).spec?.clusterIP ?? '';
    const reaches = async (): Promise<boolean> =>
      (
        await execCapture(
          k,
          ns,
          podName,
          ['python3', '-c', `import socket\ntry:\n  socket.create_connection(("${apiIp}", 443), timeout=1); print("REACHED")\nexcept OSError: print("CUT")`],
          SANDBOX_CONTAINER,
        )
      ).stdout.includes('REACHED');
    const opener = 'allow-all-egress';
    await k.networking.createNamespacedNetworkPolicy({
      namespace: ns,
      body: { metadata: { name: opener }, spec: { podSelector: {}, policyTypes: ['Egress'], egress: [{}] } },
    });
    try {
      await until(reaches, 30_000, 'the session pod to reach the API server through the second policy');
      const before = (await read()) as V1NetworkPolicy;
      await k.networking.deleteNamespacedNetworkPolicy({ namespace: ns, name });
      await restoredFrom(before, { uid: before.metadata?.uid });

      const call = await mcp.callTool('execute_code', { session, code: 'x += 1\nprint(x)' });
      expect(call.isError, JSON.stringify(call.content)).toBe(true);
      expect(JSON.stringify(call.content)).toMatch(/could still reach the network .*, so the code was not run/);
      const warm = await mcp.callTool('execute_code', { code: 'print("ran")' });
      expect(warm.structuredContent?.phase, JSON.stringify(warm.content)).toBe('Failed');
      expect(String(warm.structuredContent?.stdout ?? '')).not.toContain('ran');
      expect(String(warm.structuredContent?.message ?? '') + String(warm.structuredContent?.stderr ?? '')).toMatch(/could still reach the network/);
      // A cold pod (a run with resources of its own takes no pool pod) starts with network: its
      // kernel refuses to start, and the run says why (before, "the kernel relay exited").
      const cold = await coldRun(`cold-open-${Date.now()}`, 'print("ran")');
      expect(cold.status?.phase, JSON.stringify(cold.status)).toBe('Failed');
      expect(cold.status?.stdout ?? '').not.toContain('ran');
      expect(cold.status?.message, JSON.stringify(cold.status)).toMatch(/could still reach the network when its kernel started/);
    } finally {
      await k.networking.deleteNamespacedNetworkPolicy({ namespace: ns, name: opener }).catch(() => undefined);
    }
    await until(async () => !(await reaches()), 30_000, 'the session pod to lose its network again');
    const after = await mcp.callTool('execute_code', { session, code: 'print(x)' });
    expect(after.structuredContent?.stdout, JSON.stringify(after.content)).toBe('41\n');
    await mcp.callTool('close_session', { session });
  });
});

describe('under a loop that deletes and edits the policy', () => {
  it('no sandbox started meanwhile exchanges data with the API server or another pod', { timeout: 600_000 }, async () => {
    const payload = `netpol-${Date.now()}`;
    const server = await runPod(
      k,
      ns,
      simplePod('server', ['sh', '-c', `mkdir -p /tmp/www && echo ${payload} > /tmp/www/data && cd /tmp/www && exec python3 -m http.server 8080`]),
    );
    const apiIp = (await k.core.readNamespacedService({ namespace: 'default', name: 'kubernetes' })).spec?.clusterIP ?? '';
    const probe = probeCode(apiIp, `${server.status?.podIP}`, payload);
    // Control: the same code in an ordinary pod does exchange data with both, so a FAILED below
    // means the network was cut, not that the probe cannot work.
    await runPod(k, ns, simplePod('control', ['sleep', 'infinity']));
    await until(
      async () => /api GOT[\s\S]*pod GOT/.test((await execCapture(k, ns, 'control', ['python3', '-c', probe])).stdout),
      60_000,
      'the control pod to reach both',
    );

    const benign = await startBenignNeighbour(op.url, { runEvery: 4, pauseMs: 200 });
    const chaos = startChaos();
    // Each lane goes on past its count until the loop has fought twice: on a quiet machine the
    // counts alone were done within 15 s, before the second fight began.
    const untilTwoFights = (): boolean => chaos.fights.length < 2;
    const outputs: Array<[string, string]> = [];
    const note = (what: string, phase: unknown, stdout: unknown, message?: unknown): void =>
      void outputs.push([what, `${String(phase)} ${String(stdout)} ${message ? String(message) : ''}`]);
    try {
      await Promise.all([
        // Warm while the pool has pods, cold once the pool is drained.
        lane(8, untilTwoFights, async (i) => {
          const r = await mcp.callTool('execute_code', { code: probe, timeout_seconds: 30 });
          note(`transient ${i}`, r.structuredContent?.phase, r.structuredContent?.stdout, r.structuredContent?.message);
        }),
        // Applied SandboxRuns with resources set never take a pool pod: always a cold pod.
        lane(5, untilTwoFights, async (i) => {
          const run = await coldRun(`cold-${i}`, probe);
          note(`cold ${i}`, run.status?.phase, run.status?.stdout, run.status?.message);
        }),
        // Sessions started meanwhile (a pool pod or their own), and calls in them.
        lane(2, untilTwoFights, async (i) => {
          const created = await mcp.callTool('create_session', { language: 'python' });
          const session = String(created.structuredContent?.session ?? '');
          expect(created.isError ?? false, JSON.stringify(created.content)).toBe(false);
          for (let c = 0; c < 3; c++) {
            const r = await mcp.callTool('execute_code', { session, code: probe, timeout_seconds: 30 });
            note(`session ${i} call ${c}`, r.structuredContent?.phase, r.structuredContent?.stdout, r.structuredContent?.message);
          }
          await mcp.callTool('close_session', { session });
        }),
      ]);
    } finally {
      await chaos.stop();
    }
    const report = await benign.stop();
    await restoredFrom(original, {});

    const verdicts = outputs.map(([what, out]) => ({ what, out, verdict: verdict(out, chaos.fights) }));
    // The timeline, in ms from the first fight: printed, and in the message of a failed assertion
    // (CI keeps only that part of the output).
    const t0 = chaos.fights[0]?.start ?? 0;
    const rel = (text: string): string => text.replace(/\b(\d{13})\b/g, (ms) => `@${Number(ms) - t0}`).replace(/\s+/g, ' ');
    const lines = verdicts.map((v) => {
      const t = Number(/t (\d+)/.exec(v.out)?.[1]);
      const lastBreak = chaos.breaks.filter((b) => b <= t).at(-1);
      return `${v.verdict.padEnd(9)} ${v.what} (last break ${lastBreak === undefined ? '-' : t - lastBreak} ms before): ${rel(v.out).slice(0, 130)}`;
    });
    const timeline = [
      `fights: ${chaos.fights.map((f) => `${f.start - t0}..${f.end - t0}`).join(', ')}`,
      `breaks: ${chaos.breaks.map((b) => b - t0).join(' ')}`,
    ];
    console.log([...timeline, ...lines].join('\n'));
    expect(chaos.fights.length, 'the loop broke the policy more than once').toBeGreaterThanOrEqual(2);
    expect(chaos.counts.deletes, 'the loop deleted the policy').toBeGreaterThanOrEqual(2);
    expect(chaos.counts.edits, 'the loop edited the policy').toBeGreaterThanOrEqual(2);
    expect(outputs.length).toBeGreaterThanOrEqual(8 + 5 + 2 * 3);
    for (const { what, out } of verdicts) expect(out, what).toMatch(/^Succeeded t \d+\napi \w+/);
    expect(
      lines.filter((l) => l.startsWith('violation')),
      [...timeline, ...lines.filter((l) => !l.startsWith('clean'))].join('\n'),
    ).toEqual([]);
    expect(report.failures).toEqual([]);
    expect(report.calls).toBeGreaterThan(0);
  });
});

/**
 * Python that tries to exchange data with the API server (TLS + an HTTP request to /version; any
 * answer, even 401, is data) and with a pod serving `payload`. The sandbox has no service
 * environment variables, so the addresses are in the code. Prints when it started (`t <ms>`) and,
 * for each peer that answered, when the connection was made (`api GOT <ms>`).
 */
function probeCode(apiIp: string, podIp: string, payload: string): string {
  return `import socket, ssl, time
def ms():
    return int(time.time() * 1000)
print("t", ms())
def api():
    try:
        s = socket.create_connection(("${apiIp}", 443), timeout=2)
        at = ms()
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        t = ctx.wrap_socket(s)
        t.sendall(b"GET /version HTTP/1.1\\r\\nHost: kubernetes\\r\\nConnection: close\\r\\n\\r\\n")
        return "GOT %d" % at if t.recv(64) else "FAILED empty"
    except Exception as e:
        return "FAILED " + type(e).__name__
def pod():
    try:
        s = socket.create_connection(("${podIp}", 8080), timeout=2)
        at = ms()
        s.sendall(b"GET /data HTTP/1.0\\r\\n\\r\\n")
        data = b""
        while len(data) < 4096:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        return "GOT %d" % at if b"${payload}" in data else "FAILED no payload"
    except Exception as e:
        return "FAILED " + type(e).__name__
print("api", api())
print("pod", pod())
`;
}

/** Runs `n` calls of `fn` one after another. */
/** `fn` n times, then again while `more()` (at most 10 × n times in all). */
async function lane(n: number, more: () => boolean, fn: (i: number) => Promise<void>): Promise<void> {
  for (let i = 0; i < n || (more() && i < 10 * n); i++) await fn(i);
}

async function coldRun(runName: string, code: string): Promise<SandboxRun> {
  const api = { group: GROUP, version: VERSION, plural: SANDBOXRUN_PLURAL, namespace: ns };
  const spec = { language: 'python', code, timeoutSeconds: 30, resources: { cpu: '500m' } };
  await k.custom.createNamespacedCustomObject({ ...api, body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'SandboxRun', metadata: { name: runName }, spec } });
  let run: SandboxRun | undefined;
  await until(
    async () => {
      run = (await k.custom.getNamespacedCustomObject({ ...api, name: runName })) as SandboxRun;
      return ['Succeeded', 'Failed', 'TimedOut'].includes(run.status?.phase ?? '');
    },
    180_000,
    `SandboxRun ${runName} to finish`,
  );
  return run as SandboxRun;
}

/** Slack for code that passed the gate just before a fight began (watch latency + start-up). */
const RACE_MS = 1500;

/**
 * One sandbox's probe against the policy's fights (pure):
 * - 'clean': it exchanged no data and did not start during a fight;
 * - 'race': every connection that carried data was made after a fight's first change, by code that
 *   started before that change or within RACE_MS of it — code that passed the gate just before,
 *   caught by the change (the CNI opens running pods ~200-500 ms after a delete, measured; the gate
 *   cannot stop code that already started). A probe started a little before the fight can connect
 *   after it: when the node rate-limits the REJECT's ICMP answers (6 at once, then 1 a second per
 *   pod) a refused SYN is dropped silently instead, and TCP sends it again a second later;
 * - 'violation': it started during a fight (the gate let code start while the policy was known
 *   broken), or it made a connection that carried data outside that slack (started unprotected).
 */
function verdict(out: string, fights: ReadonlyArray<{ start: number; end: number }>): 'clean' | 'race' | 'violation' {
  const t = Number(/t (\d+)/.exec(out)?.[1]);
  const connected = [...out.matchAll(/GOT (\d+)/g)].map((m) => Number(m[1]));
  const caught = (at: number): boolean => fights.some((f) => at >= f.start && t <= f.start + RACE_MS);
  if (connected.length > 0) return connected.every(caught) ? 'race' : 'violation';
  return fights.some((f) => t >= f.start + RACE_MS && t <= f.end) ? 'violation' : 'clean';
}

/**
 * Fights the operator over the policy: quiet for a while, then for FIGHT_MS deletes or edits it
 * (allow-all egress, another podSelector, label removed) every ~150 ms, again and again. During a
 * fight the policy is broken most of the time, so the gate must hold every sandbox back.
 */
function startChaos(): {
  counts: { deletes: number; edits: number };
  fights: Array<{ start: number; end: number }>;
  breaks: number[];
  stop(): Promise<void>;
} {
  const QUIET_MS = 5000;
  const FIGHT_MS = 5000;
  const counts = { deletes: 0, edits: 0 };
  const fights: Array<{ start: number; end: number }> = [];
  /** When each delete or edit that the API server accepted was sent. */
  const breaks: number[] = [];
  let stopping = false;
  const loop = (async (): Promise<void> => {
    for (let i = 0; !stopping;) {
      await sleep(QUIET_MS);
      if (stopping) break;
      const start = Date.now();
      while (!stopping && Date.now() - start < FIGHT_MS) {
        const sent = Date.now();
        if (i++ % 2 === 0) {
          if (
            await k.networking.deleteNamespacedNetworkPolicy({ namespace: ns, name }).then(
              () => true,
              () => false,
            )
          ) {
            counts.deletes++;
            breaks.push(sent);
          }
        } else {
          const [, change] = edits[(i >> 1) % edits.length] as [string, Edit];
          if (await edit(change)) {
            counts.edits++;
            breaks.push(sent);
          }
        }
        await sleep(150);
      }
      fights.push({ start, end: Date.now() });
    }
  })();
  return {
    counts,
    fights,
    breaks,
    async stop(): Promise<void> {
      stopping = true;
      await loop;
    },
  };
}
