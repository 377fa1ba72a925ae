// Measures how long the CNI (kube-router on the test cluster) takes to program the sandbox
// NetworkPolicy: after a delete, a re-create, an allow-all edit and its undo, and for a new pod;
// and whether a connection opened while the policy was gone survives its restore. A probe pod
// with the sandbox label tries a fresh TCP exchange with a server pod every ~20 ms and prints
// each change of state with the host clock (pods share the node's clock with this process).
// Run: npx tsx bench/netpol-programming.ts (uses $KUBECONFIG; its own namespace, deleted after).
import { buildSandboxNetworkPolicy, SANDBOX_NETWORK_POLICY_NAME } from '../src/sandbox/networkpolicy.js';
import { createNamespace, deleteNamespace, runPod, simplePod, testKube, type TestKube } from '../test/e2e/helpers/kube.js';

const k = testKube();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const PROBE = (ip: string): string => `
import socket, time, sys
state = None
persistent = None
while True:
    ok = False
    try:
        s = socket.create_connection(("${ip}", 7000), timeout=0.1)
        s.settimeout(0.1); s.sendall(b"x"); ok = s.recv(1) == b"x"; s.close()
    except Exception:
        pass
    if persistent is None and ok:
        try:
            persistent = socket.create_connection(("${ip}", 7000), timeout=0.1); persistent.settimeout(0.1)
            print("%d persistent-opened" % (time.time() * 1000), flush=True)
        except Exception:
            persistent = None
    if persistent is not None:
        try:
            persistent.sendall(b"y"); pok = persistent.recv(1) == b"y"
        except Exception:
            pok = False
        if not pok:
            print("%d persistent-broken" % (time.time() * 1000), flush=True); persistent = None
    if ok != state:
        print("%d %s" % (time.time() * 1000, "open" if ok else "closed"), flush=True)
        state = ok
    time.sleep(0.02)
`;

const ECHO = `
import socket, threading
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); srv.bind(("0.0.0.0", 7000)); srv.listen(64)
def serve(c):
    try:
        while True:
            d = c.recv(16)
            if not d: break
            c.sendall(d)
    except Exception: pass
    c.close()
while True:
    c, _ = srv.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
`;

async function events(k: TestKube, ns: string, pod: string): Promise<Array<[number, string]>> {
  const log = await k.core.readNamespacedPodLog({ namespace: ns, name: pod });
  return String(log)
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [t, what] = l.split(' ');
      return [Number(t), String(what)] as [number, string];
    });
}

/** First probe event of kind `what` after `since`, as ms after `since`. */
async function after(ns: string, pod: string, since: number, what: string): Promise<number | undefined> {
  const e = (await events(k, ns, pod)).find(([t, w]) => t >= since && w === what);
  return e ? e[0] - since : undefined;
}

async function main(): Promise<void> {
  const ns = await createNamespace(k, 'netpol-bench');
  const policy = buildSandboxNetworkPolicy(ns);
  const put = (): Promise<unknown> => k.networking.createNamespacedNetworkPolicy({ namespace: ns, body: policy });
  const del = (): Promise<unknown> => k.networking.deleteNamespacedNetworkPolicy({ namespace: ns, name: SANDBOX_NETWORK_POLICY_NAME });
  const probeLabels = { 'codemode.dev/sandbox': 'true' };
  try {
    await put();
    const server = await runPod(k, ns, simplePod('echo', ['python3', '-c', ECHO]));
    const ip = server.status?.podIP ?? '';
    const rounds = Number(process.env.ROUNDS ?? 5);
    // 1. New pods created while the policy is in place: any open window at start?
    for (let i = 0; i < rounds; i++) {
      const name = `new-${i}`;
      await runPod(k, ns, simplePod(name, ['python3', '-c', PROBE(ip)], probeLabels));
      await sleep(3000);
      const ev = await events(k, ns, name);
      console.log(`new pod ${i}: first states ${JSON.stringify(ev.slice(0, 3).map(([t, w]) => [w, t - (ev[0]?.[0] ?? t)]))}`);
      await k.core.deleteNamespacedPod({ namespace: ns, name, gracePeriodSeconds: 0 });
    }
    await runPod(k, ns, simplePod('probe', ['python3', '-c', PROBE(ip)], probeLabels));
    await sleep(2000);
    // 2. Delete, then re-create after 4 s.
    for (let i = 0; i < rounds; i++) {
      const t0 = Date.now();
      await del();
      await sleep(4000);
      const opened = await after(ns, 'probe', t0, 'open');
      const t1 = Date.now();
      await put();
      await sleep(4000);
      const closed = await after(ns, 'probe', t1, 'closed');
      const broken = await after(ns, 'probe', t1, 'persistent-broken');
      console.log(`delete→open ${opened} ms; create→closed ${closed} ms; connection opened meanwhile broken after ${broken ?? 'never (within 4 s)'} ms`);
    }
    // 3. Delete and re-create at once (what the operator does, tens of ms apart).
    for (let i = 0; i < rounds; i++) {
      const t0 = Date.now();
      await del();
      const gap = Date.now();
      await put();
      const t1 = Date.now();
      await sleep(4000);
      const ev = (await events(k, ns, 'probe')).filter(([t]) => t >= t0);
      console.log(
        `delete+create (${t1 - t0} ms, create sent ${t1 - gap} ms after the delete returned): probe events ${JSON.stringify(ev.map(([t, w]) => [w, t - t0]))}`,
      );
    }
    // 4. An allow-all egress edit, undone after 4 s.
    for (let i = 0; i < rounds; i++) {
      const current = await k.networking.readNamespacedNetworkPolicy({ namespace: ns, name: SANDBOX_NETWORK_POLICY_NAME });
      const t0 = Date.now();
      const edited = await k.networking.replaceNamespacedNetworkPolicy({
        namespace: ns,
        name: SANDBOX_NETWORK_POLICY_NAME,
        body: { ...current, spec: { ...current.spec, podSelector: current.spec?.podSelector ?? {}, egress: [{}] } },
      });
      await sleep(4000);
      const opened = await after(ns, 'probe', t0, 'open');
      const t1 = Date.now();
      await k.networking.replaceNamespacedNetworkPolicy({
        namespace: ns,
        name: SANDBOX_NETWORK_POLICY_NAME,
        body: { ...policy, metadata: { ...policy.metadata, resourceVersion: edited.metadata?.resourceVersion } },
      });
      await sleep(4000);
      const closed = await after(ns, 'probe', t1, 'closed');
      console.log(`edit allow-all→open ${opened} ms; undo→closed ${closed} ms`);
    }
  } finally {
    await deleteNamespace(k, ns);
  }
}

await main();
