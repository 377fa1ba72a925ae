// The datascience profile (issue 12), all in one run:
// - warm: execute_code `import numpy, pandas, matplotlib; print(1)` served by a warm pod of the
//   profile (its kernel pre-imported them), against a raw exec `print(1)` in a running pod of the
//   same image — goal ≤ 1.0×;
// - the same import raw (exec in a running pod) and cold (execute_code in a profile without a
//   pool), so the saving is visible;
// - a Matplotlib figure's round trip: a session call that draws a 640×480 figure and gets it back
//   as MCP image content, against the same session answering print(1).
// - install_packages of one small pure-Python package (tabulate, 40 KB wheel) into that session:
//   a fetcher pod started, pip fetched and run, the wheel downloaded and copied in over exec.
import { GROUP, SANDBOXPROFILE_PLURAL, VERSION } from '../src/api/v1alpha1/index.js';
import { connect, startOperator, type TestClient } from '../test/e2e/helpers/operator.js';
import { failed, latency, log, sleep, type BenchContext } from './context.js';
import { scaled } from './env.js';
import { rawExecLatency, startTargetPod } from './floor.js';
import type { Latency } from './report.js';
import { PodTimeline, ensureNetworkPolicy } from './sandbox-pod.js';

export const DATASCIENCE_IMAGE = 'codemode.local/datascience:v1';
const IMPORTS = 'import numpy, pandas, matplotlib';
const PRELOAD = ['numpy', 'pandas', 'matplotlib'];

export interface PlotsResult {
  /** raw exec python3 -c 'print(1)' in a running datascience pod: the floor of the import rows. */
  rawPrint1: Latency;
  /** raw exec of the imports + print(1) in the same pod. */
  rawImport: Latency;
  /** execute_code of the imports + print(1), served warm by the profile's pool. */
  warmImport: Latency;
  /** execute_code print(1) served warm by the profile's pool (what the imports add to a warm run). */
  warmPrint1: Latency;
  /** execute_code of the imports + print(1) in a cold pod of a profile without a pool. */
  coldImport: Latency;
  /** execute_code print(1) in a session of the profile (Matplotlib imported). */
  print1: Latency;
  /** execute_code of a line plot in the same session, its PNG back as image content. */
  plot: Latency;
  /** Decoded bytes of one returned PNG. */
  pngBytes: number;
  /** install_packages(session, ['tabulate==0.9.0']), the whole path (fetcher pod to import). */
  install: Latency;
}

const PLOT = 'plt.plot(range(100), [i * i for i in range(100)])';

async function createProfile(ctx: BenchContext, ns: string, name: string, warmPool: { min: number; max: number }): Promise<void> {
  await ctx.k.custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural: SANDBOXPROFILE_PLURAL,
    body: { apiVersion: `${GROUP}/${VERSION}`, kind: 'SandboxProfile', metadata: { name }, spec: { image: DATASCIENCE_IMAGE, warmPool, preImport: PRELOAD } },
  });
}

/** Ready, unclaimed pool pods of a profile. */
async function readyWarm(ctx: BenchContext, ns: string, profile: string): Promise<number> {
  const pods = await ctx.k.core.listNamespacedPod({ namespace: ns, labelSelector: `codemode.dev/pool=warm,codemode.dev/profile=${profile}` });
  return pods.items.filter((p) => !p.metadata?.deletionTimestamp && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).length;
}

/** `n` timed execute_code calls; `before` runs untimed before each (e.g. waiting for a warm pod). */
async function timed(
  client: TestClient,
  args: Record<string, unknown>,
  n: number,
  ok: (stdout: string) => boolean,
  before?: () => Promise<void>,
): Promise<Latency> {
  const samples: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  for (let i = 0; i < n; i++) {
    await before?.();
    const t0 = performance.now();
    const r = await client.callTool('execute_code', { timeout_seconds: 120, ...args });
    const dt = performance.now() - t0;
    if (!r.isError && ok(String(r.structuredContent?.stdout ?? ''))) samples.push(dt);
    else {
      errors++;
      firstError ??= JSON.stringify(r.content).slice(0, 200);
    }
  }
  return latency({ samples, errors, ...(firstError !== undefined && { firstError }) });
}

export async function plotsSection(ctx: BenchContext): Promise<PlotsResult | string> {
  const n = scaled(ctx.s, 50, 10);
  const nImport = scaled(ctx.s, 20, 5);
  try {
    const ns = await ctx.nss.create('bench-plots');
    // Raw floors in a running pod of the image, with the namespace's deny-all policy as in the operator's.
    await ensureNetworkPolicy(ctx.k, ns);
    const timeline = new PodTimeline(ctx.k, ns);
    await timeline.start();
    ctx.stops.push(() => timeline.stop());
    await startTargetPod(ctx.k, timeline, 'bench-ds-raw', DATASCIENCE_IMAGE);
    log(`plots: raw exec print(1) and the imports × ${n} in a running ${DATASCIENCE_IMAGE} pod`);
    const raw = async (code: string): Promise<Latency> => latency(await rawExecLatency(ctx.k, ns, 'bench-ds-raw', ['python3', '-c', code], n));
    const rawPrint1 = await raw('print(1)');
    const rawImport = await raw(`${IMPORTS}; print(1)`);
    await ctx.k.core.deleteNamespacedPod({ namespace: ns, name: 'bench-ds-raw', gracePeriodSeconds: 0 });

    // Two pods: a claim leaves one ready, so the refill waits for the run to end (refill deferral)
    // instead of starting a pod beside it, as in a pool sized by demand.
    await createProfile(ctx, ns, 'datascience', { min: 2, max: 2 });
    await createProfile(ctx, ns, 'datascience-cold', { min: 0, max: 0 });
    const op = await startOperator(ns, { CODEMODE_WARM_POOL_SIZE: '0', CODEMODE_DEFAULT_PROFILE: 'datascience' });
    ctx.stops.push(() => op.stop());
    const client = await connect(op.url, 'current');
    ctx.stops.push(() => client.close());
    const warmCode = `${IMPORTS}, socket\nprint(1 if socket.gethostname().startswith("codemode-pool-") else "cold")`;
    log(`plots: warm execute_code of the imports × ${nImport} (each waits, untimed, for a ready pool pod)`);
    const waitWarm = async (): Promise<void> => {
      const deadline = Date.now() + 180_000;
      while ((await readyWarm(ctx, ns, 'datascience')) < 2 && Date.now() < deadline) await sleep(200);
      // A pool pod is Ready once its container runs; its kernel then imports the profile's modules
      // (twice: the session interpreter and the prestarted one) — steady state is what is measured.
      await sleep(3000);
    };
    const warmImport = await timed(client, { code: warmCode }, nImport, (out) => out === '1\n', waitWarm);
    const warmPrint1 = await timed(
      client,
      { code: 'import socket\nprint(1 if socket.gethostname().startswith("codemode-pool-") else "cold")' },
      nImport,
      (out) => out === '1\n',
      waitWarm,
    );
    log(`plots: cold execute_code of the imports × ${nImport}`);
    const coldImport = await timed(client, { code: `${IMPORTS}; print(1)`, profile: 'datascience-cold' }, nImport, (out) => out === '1\n');

    const created = await client.callTool('create_session', { language: 'python' });
    const session = created.structuredContent?.session;
    if (typeof session !== 'string') throw new Error(`create_session failed: ${JSON.stringify(created.content).slice(0, 200)}`);
    await client.callTool('execute_code', { session, code: 'import matplotlib.pyplot as plt', timeout_seconds: 120 });
    log(`plots: print(1) × ${n} and a 640×480 line plot × ${n}, one session of the profile`);
    const time = async (code: string, check: (r: Awaited<ReturnType<typeof client.callTool>>) => boolean): Promise<number[]> => {
      const ms: number[] = [];
      for (let i = 0; i < n + 3; i++) {
        const t0 = performance.now();
        const r = await client.callTool('execute_code', { session, code });
        if (r.isError || !check(r)) throw new Error(`a call failed: ${JSON.stringify(r.content).slice(0, 200)}`);
        if (i >= 3) ms.push(performance.now() - t0);
      }
      return ms;
    };
    const image = (r: { content: Array<{ type: string }> }): { data?: string } | undefined =>
      r.content.find((c) => c.type === 'image') as { data?: string } | undefined;
    const print1 = await time('print(1)', (r) => r.structuredContent?.stdout === '1\n');
    let pngBytes = 0;
    const plot = await time(PLOT, (r) => {
      pngBytes = Buffer.from(image(r)?.data ?? '', 'base64').length;
      return pngBytes > 0;
    });
    const nInstall = scaled(ctx.s, 5, 2);
    log(`plots: install_packages of tabulate × ${nInstall} into the session`);
    const installs: number[] = [];
    let installErrors = 0;
    let installError: string | undefined;
    for (let i = 0; i < nInstall; i++) {
      const t0 = performance.now();
      const r = await client.callTool('install_packages', { session, packages: ['tabulate==0.9.0'] });
      if (r.isError) {
        installErrors++;
        installError ??= JSON.stringify(r.content).slice(0, 200);
      } else installs.push(performance.now() - t0);
    }
    await client.callTool('close_session', { session });
    return {
      install: latency({ samples: installs, errors: installErrors, ...(installError !== undefined && { firstError: installError }) }),
      rawPrint1,
      rawImport,
      warmImport,
      warmPrint1,
      coldImport,
      print1: latency({ samples: print1, errors: 0 }),
      plot: latency({ samples: plot, errors: 0 }),
      pngBytes,
    };
  } catch (err) {
    return failed('plots', err);
  }
}
