// Gateway memory with many finished SandboxRuns in its namespace: seed terminal runs (create, then
// the status subresource, in parallel batches), then measure a fresh operator + gateway process
// (bench/rss-probe.ts, a child process so this process's own heap does not count), both with tsx
// and compiled to plain JavaScript.
import { spawn } from 'node:child_process';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  API_VERSION,
  GROUP,
  LABEL_MANAGED_BY,
  MANAGED_BY_VALUE,
  Reasons,
  SANDBOXRUN_KIND,
  SANDBOXRUN_PLURAL,
  SANDBOXSESSION_PLURAL,
  VERSION,
  parseSandboxRun,
} from '../src/api/v1alpha1/index.js';
import { ANNOTATION_EXECUTOR } from '../src/api/v1alpha1/labels.js';
import { completedStatus } from '../src/runs/status.js';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { TestKube } from '../test/e2e/helpers/kube.js';
import { PROBE_PREFIX, inBatches } from './batches.js';
import type { MemoryLimit } from './memory-limit.js';

const BATCH = 25;

export interface ProbeResult {
  /** Live sessions the probe opened (each used once) before it measured. */
  sessions: number;
  rssBeforeStart: number;
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  rssAfterGc: number;
  heapUsedAfterGc: number;
  /** Peak RSS of the probe process (bytes), e.g. while the informers list. */
  maxRss?: number;
  /** With an idle wait: RSS once V8 has shrunk the young generation start-up grew (rss-probe.ts). */
  rssIdle?: number;
  idleSeconds?: number;
  newSpaceAtSettle?: number;
  newSpaceIdle?: number;
  /** The memory limit the probe ran under (the chart's), when it ran under one. */
  memoryLimit?: string;
}

async function seedOne(k: TestKube, ns: string, i: number): Promise<void> {
  const name = `bench-done-${String(i).padStart(5, '0')}`;
  const created = await k.custom.createNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace: ns,
    plural: SANDBOXRUN_PLURAL,
    body: {
      apiVersion: API_VERSION,
      kind: SANDBOXRUN_KIND,
      metadata: { name, labels: { [LABEL_MANAGED_BY]: MANAGED_BY_VALUE }, annotations: { [ANNOTATION_EXECUTOR]: 'bench-seed' } },
      spec: { language: 'python', code: 'print(1)', timeoutSeconds: 30 },
    },
  });
  const parsed = parseSandboxRun(created);
  if (!parsed.ok) throw new Error(`Seeded SandboxRun ${ns}/${name} does not parse: ${parsed.message}`);
  const end = new Date();
  // The status a real `print(1)` run ends with, from the operator's own pure status function.
  const status = completedStatus(
    parsed.run,
    { phase: 'Succeeded', reason: Reasons.Succeeded, exitCode: 0, message: 'The program exited with code 0.' },
    { stdout: '1\n', stderr: '', stdoutBytes: 2, stderrBytes: 0, truncated: false },
    { start: new Date(end.getTime() - 120), end },
  );
  await k.custom.patchNamespacedCustomObjectStatus(
    { group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL, name, body: { status } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

/** Creates `count` finished runs, BATCH at a time; returns the seconds it took. */
export async function seedFinishedRuns(k: TestKube, ns: string, count: number): Promise<number> {
  const t0 = performance.now();
  await inBatches(count, BATCH, (i) => seedOne(k, ns, i));
  return (performance.now() - t0) / 1000;
}

export async function deleteSeededRuns(k: TestKube, ns: string): Promise<void> {
  await k.custom.deleteCollectionNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXRUN_PLURAL });
}

/** The probe's sessions outlive it (they are cluster state); their pods go with them. */
export async function deleteSessions(k: TestKube, ns: string): Promise<void> {
  await k.custom.deleteCollectionNamespacedCustomObject({ group: GROUP, version: VERSION, namespace: ns, plural: SANDBOXSESSION_PLURAL });
}

export type ProbeMode = 'tsx' | 'compiled';

/**
 * Compiles the repository (no type check) to a temporary directory, so the probe can also run as
 * plain JavaScript like the deployed gateway: tsx's on-the-fly compiler costs tens of MB of RSS.
 */
export async function compileProbe(sourceDir?: string): Promise<{ dir: string; remove: () => Promise<void> }> {
  const here = fileURLToPath(new URL('..', import.meta.url));
  // Another checkout (a baseline commit) compiles with this checkout's dependencies.
  const root = sourceDir ?? here;
  const dir = await mkdtemp(join(tmpdir(), 'codemode-bench-'));
  await writeFile(join(dir, 'package.json'), '{ "type": "module" }\n');
  await symlink(join(here, 'node_modules'), join(dir, 'node_modules'));
  // The session kernels are found next to the code (src/sessions/runtime-files.ts).
  await symlink(join(root, 'runtime'), join(dir, 'runtime'));
  const tsc = join(here, 'node_modules/typescript/bin/tsc');
  await run(process.execPath, [tsc, '-p', join(root, 'tsconfig.json'), '--outDir', dir, '--noCheck', '--sourceMap', 'false']);
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    // A V8 out-of-memory crash says so on one line, far above the end of its stack dump.
    const why = (): string => /FATAL ERROR:[^\n]*/.exec(err)?.[0] ?? (err || out).slice(-500);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args.join(' ')} exited ${String(code)}: ${why()}`))));
  });
}

/**
 * Runs the probe on `ns` in a child process and returns what it measured: with tsx (as the
 * bench itself runs), or compiled (`compiledDir` from compileProbe) with plain node; with
 * `sessions` live sessions opened by the probe's gateway before it measures.
 */
export async function probeRss(
  ns: string,
  mode: ProbeMode,
  compiledDir?: string,
  sessions = 0,
  nodeArgs: string[] = [],
  idleSeconds = 0,
  limit?: MemoryLimit,
): Promise<ProbeResult> {
  const args = [
    ...nodeArgs,
    ...(mode === 'tsx'
      ? [
          fileURLToPath(new URL('../node_modules/tsx/dist/cli.mjs', import.meta.url)),
          fileURLToPath(new URL('./rss-probe.ts', import.meta.url)),
          ns,
          String(sessions),
          String(idleSeconds),
        ]
      : [join(compiledDir ?? '', 'bench/rss-probe.js'), ns, String(sessions), String(idleSeconds)]),
  ];
  // process.execPath: the Node 22 this bench runs on, not whatever `node` is first on PATH.
  const command = limit?.wrap(process.execPath, args) ?? { cmd: process.execPath, args, remove: () => {} };
  let out: string;
  try {
    out = await run(command.cmd, command.args);
  } finally {
    command.remove();
  }
  const line = out.split('\n').find((l) => l.startsWith(PROBE_PREFIX));
  if (!line) throw new Error(`rss-probe printed no result: ${out.slice(-500)}`);
  return { ...(JSON.parse(line.slice(PROBE_PREFIX.length)) as ProbeResult), ...(limit && { memoryLimit: limit.quantity }) };
}
