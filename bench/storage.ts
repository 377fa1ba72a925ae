// Gateway memory after a restart with the namespace full of large finished SandboxRuns: seed runs
// whose code, stdin, stdout and stderr are each `fieldBytes` long (written straight through the
// API, status included), then start a fresh operator + gateway in a child process (rss-probe.ts,
// compiled to plain JavaScript as deployed) and read its RSS once the informers are filled, and
// its peak RSS (the initial list is where an unbounded cache runs out of memory).
//
// etcd holds what is seeded: 2,000 runs of 1 MiB would be 2 GiB, etcd's default quota, and would
// make the shared cluster read-only. The shapes below keep each namespace near 200 MiB.
// Standalone: tsx bench/storage.ts [baselineDir] — baselineDir is another checkout of the
// repository (e.g. the commit before the cache stripping): its operator is probed on the same
// seeded namespace before this checkout's, for a before/after pair from one seeding.
import './env.js';
import { pathToFileURL } from 'node:url';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import {
  API_VERSION,
  GROUP,
  LABEL_MANAGED_BY,
  MANAGED_BY_VALUE,
  MAX_CODE_BYTES_HARD,
  Reasons,
  SANDBOXRUN_KIND,
  SANDBOXRUN_PLURAL,
  VERSION,
} from '../src/api/v1alpha1/index.js';
import { ANNOTATION_EXECUTOR } from '../src/api/v1alpha1/labels.js';
import { createNamespace, deleteNamespace, testKube, type TestKube } from '../test/e2e/helpers/kube.js';
import { inBatches, log } from './context.js';
import { compileProbe, deleteSeededRuns, probeRss, type ProbeResult } from './rss.js';

export interface StorageShape {
  runs: number;
  /** Bytes of each of code, stdin, stdout and stderr. */
  fieldBytes: number;
}

/** The count the deploy ResourceQuota allows (count/sandboxruns), and the largest object. */
export const STORAGE_SHAPES: readonly StorageShape[] = [
  { runs: 2000, fieldBytes: 24 * 1024 },
  { runs: 200, fieldBytes: MAX_CODE_BYTES_HARD },
];

/** The shapes at a bench scale: fewer runs, same sizes (the size is what is measured). */
export function storageShapes(scale: number): StorageShape[] {
  return STORAGE_SHAPES.map((s) => ({ ...s, runs: Math.max(10, Math.round(s.runs * Math.min(1, scale))) }));
}

export interface StorageRow extends StorageShape {
  seedSeconds: number;
  probe: ProbeResult;
  /** The same start with V8's heap capped as in the deployed container; why it failed, if it did. */
  capped: ProbeResult | string;
}

/**
 * deploy/ limits the gateway container to 512Mi: a heap cap of 384 MiB leaves the rest for code,
 * buffers and the stack. Uncapped, V8 on a large machine lets garbage pile up before collecting,
 * which says little about whether the gateway fits its container.
 */
export const CAPPED_HEAP_MB = 384;

/** Small batches: each request carries up to 1 MiB, and the API server shares 2 cores. */
const BATCH = 8;

/** `bytes` of printable ASCII that varies per run (JSON stores it 1:1). */
function text(seed: number, bytes: number): string {
  const unit = `run ${seed} `.padEnd(64, 'x');
  return unit.repeat(Math.ceil(bytes / unit.length)).slice(0, bytes);
}

async function seedOne(k: TestKube, ns: string, i: number, fieldBytes: number): Promise<void> {
  const name = `big-done-${String(i).padStart(5, '0')}`;
  await k.custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural: SANDBOXRUN_PLURAL,
    body: {
      apiVersion: API_VERSION,
      kind: SANDBOXRUN_KIND,
      metadata: { name, labels: { [LABEL_MANAGED_BY]: MANAGED_BY_VALUE }, annotations: { [ANNOTATION_EXECUTOR]: 'bench-seed' } },
      spec: { language: 'python', code: text(i, fieldBytes), stdin: text(i + 1, fieldBytes), timeoutSeconds: 30 },
    },
  });
  const now = new Date().toISOString();
  const status = {
    phase: 'Succeeded',
    reason: Reasons.Succeeded,
    message: 'The program exited with code 0.',
    exitCode: 0,
    stdout: text(i + 2, fieldBytes),
    stderr: text(i + 3, fieldBytes),
    stdoutBytes: fieldBytes,
    stderrBytes: fieldBytes,
    truncated: false,
    startTime: now,
    completionTime: now,
    durationMs: 1,
    observedGeneration: 1,
  };
  await k.custom.patchNamespacedCustomObjectStatus(
    { group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL, name, body: { status } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

export async function seedLargeRuns(k: TestKube, ns: string, shape: StorageShape): Promise<number> {
  const t0 = performance.now();
  await inBatches(shape.runs, BATCH, (i) => seedOne(k, ns, i, shape.fieldBytes));
  return Math.round((performance.now() - t0) / 100) / 10;
}

/** An operator to probe: this checkout, or another one (a baseline commit) by its directory. */
export interface ProbeSource {
  label: string;
  dir?: string;
}

/** Seeds each shape in its own namespace, probes every source's operator on it, cleans up. */
export async function measureStorage(
  k: TestKube,
  shapes: readonly StorageShape[] = STORAGE_SHAPES,
  sources: readonly ProbeSource[] = [{ label: 'this checkout' }],
): Promise<Array<StorageRow & { source: string }>> {
  const compiled = await Promise.all(sources.map(async (src) => ({ src, build: await compileProbe(src.dir) })));
  const rows: Array<StorageRow & { source: string }> = [];
  try {
    for (const shape of shapes) {
      const ns = await createNamespace(k, 'bench-storage');
      try {
        log(`storage: seeding ${shape.runs} finished runs of 4 × ${shape.fieldBytes} bytes`);
        const seedSeconds = await seedLargeRuns(k, ns, shape);
        for (const { src, build } of compiled) {
          log(`storage: probing a fresh gateway (${src.label})`);
          const probe = await probeRss(ns, 'compiled', build.dir);
          log(`storage: ${src.label}: rss ${(probe.rss / 1e6).toFixed(1)} MB, peak ${((probe.maxRss ?? 0) / 1e6).toFixed(1)} MB`);
          const capped = await probeRss(ns, 'compiled', build.dir, 0, [`--max-old-space-size=${CAPPED_HEAP_MB}`]).catch(
            (err: unknown) =>
              `failed: ${String(err)
                .replace(/^.* exited /s, 'exited ')
                .slice(0, 200)}`,
          );
          log(
            `storage: ${src.label}, heap capped at ${CAPPED_HEAP_MB} MiB: ${typeof capped === 'string' ? capped : `rss ${(capped.rss / 1e6).toFixed(1)} MB, peak ${((capped.maxRss ?? 0) / 1e6).toFixed(1)} MB`}`,
          );
          rows.push({ ...shape, seedSeconds, probe, capped, source: src.label });
        }
      } finally {
        await deleteSeededRuns(k, ns).catch(() => undefined);
        await deleteNamespace(k, ns);
      }
    }
  } finally {
    await Promise.all(compiled.map((c) => c.build.remove()));
  }
  return rows;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  // argv: [baselineDir|-] [max]: "max" seeds only the maximum-size shape.
  const baseline = process.argv[2] === '-' ? undefined : process.argv[2];
  const shapes = process.argv[3] === 'max' ? STORAGE_SHAPES.slice(1) : STORAGE_SHAPES;
  const sources = baseline ? [{ label: `baseline ${baseline}`, dir: baseline }, { label: 'this checkout' }] : [{ label: 'this checkout' }];
  measureStorage(testKube(), shapes, sources).then(
    (rows) => {
      for (const r of rows) {
        const capped = typeof r.capped === 'string' ? r.capped : { rss: r.capped.rss, maxRss: r.capped.maxRss };
        process.stdout.write(
          `${JSON.stringify({ source: r.source, runs: r.runs, fieldBytes: r.fieldBytes, seedSeconds: r.seedSeconds, rss: r.probe.rss, maxRss: r.probe.maxRss, heapUsedAfterGc: r.probe.heapUsedAfterGc, capped })}\n`,
        );
      }
      process.exit(0);
    },
    (err: unknown) => {
      process.stderr.write(`storage bench failed: ${String(err)}\n`);
      process.exit(1);
    },
  );
}
