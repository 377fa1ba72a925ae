// Where the time of a cold execute_code goes. Each call of a sequential batch is cut into phases
// by timestamps taken in this process: the operator's own API requests (RequestTally), a watch on
// the sandbox pods (PodTimeline) and the client's call/reply. No change to src/ is needed.
import { execInPod } from '../src/exec/exec.js';
import { newNonce, parseTrailer, runnerCommand } from '../src/exec/runner.js';
import { podNameForRun } from '../src/sandbox/names.js';
import type { TestKube } from '../test/e2e/helpers/kube.js';
import type { RequestTally } from './api-requests.js';
import type { TimedCall } from './mcp.js';
import type { PodTimeline } from './sandbox-pod.js';
import { SANDBOX_CONTAINER } from './sandbox-pod.js';
import { rounded, summarize, type Summary } from './stats.js';

export const COLD_PHASES = [
  'gateway → SandboxRun create sent',
  'SandboxRun create → Pod create sent',
  'Pod create → scheduled (watch)',
  'scheduled → Ready → exec sent',
  'exec (runner + print(1))',
  'status patch → MCP reply',
] as const;

export interface ColdProfile {
  phasesMs: Record<string, Summary>;
  /** Calls whose status was patched twice (Running, then the result): code ran > 250 ms. */
  twoStatusPatches: number;
  profiled: number;
}

export function profileColdCalls(calls: readonly TimedCall[], tally: RequestTally, pods: PodTimeline): ColdProfile {
  const phases: number[][] = COLD_PHASES.map(() => []);
  let twoPatches = 0;
  let profiled = 0;
  for (const call of calls) {
    const reqs = tally.between(call.start, call.end);
    const first = (key: string): number | undefined => reqs.find((r) => r.key === key)?.t;
    const patches = reqs.filter((r) => r.key === 'patch sandboxruns/status');
    const times = pods.timesOf(podNameForRun(call.run ?? ''));
    // The operator's own informer sees the pod Ready a few ms before this bench's watch does, so
    // "Ready" is not a mark of its own: the exec request is the first sign the operator saw it.
    const marks = [call.start, first('create sandboxruns'), first('create pods'), times.scheduled, first('connect pods/exec'), patches.at(-1)?.t, call.end];
    if (marks.some((m) => m === undefined)) continue;
    profiled++;
    if (patches.length > 1) twoPatches++;
    for (let i = 0; i < COLD_PHASES.length; i++) phases[i]?.push((marks[i + 1] as number) - (marks[i] as number));
  }
  return {
    phasesMs: Object.fromEntries(COLD_PHASES.map((p, i) => [p, rounded(summarize(phases[i] ?? []))])),
    twoStatusPatches: twoPatches,
    profiled,
  };
}

export interface ExecSplit {
  rawPythonMs: Summary;
  runnerPythonMs: Summary;
}

/**
 * The operator's exec (the runner script: mktemp, dd of the code from stdin, timeout, python3, a
 * trailer) against `python3 -c 'print(1)'`, both through src/exec's execInPod, interleaved, in
 * one running pod: what the runner adds on top of the raw exec.
 */
export async function execSplit(k: TestKube, ns: string, pod: string, n: number): Promise<ExecSplit> {
  const raw: number[] = [];
  const runner: number[] = [];
  const code = Buffer.from('print(1)\n');
  for (let i = 0; i < n + 3; i++) {
    const r1 = await execInPod(k.exec, { namespace: ns, pod, container: SANDBOX_CONTAINER, command: ['python3', '-c', 'print(1)'], capChars: 1000, watchdogMs: 30_000 });
    const nonce = newNonce();
    const r2 = await execInPod(k.exec, { namespace: ns, pod, container: SANDBOX_CONTAINER, command: runnerCommand('python', 30, code.length, nonce), stdin: code, capChars: 1000, watchdogMs: 30_000 });
    if (r1.exitCode !== 0 || parseTrailer(r2.stderrTail, nonce)?.exitCode !== 0) throw new Error(`exec split failed: ${r1.error ?? ''} ${r2.error ?? r2.stderr.text}`);
    if (i < 3) continue;
    raw.push(r1.durationMs);
    runner.push(r2.durationMs);
  }
  return { rawPythonMs: rounded(summarize(raw)), runnerPythonMs: rounded(summarize(runner)) };
}
