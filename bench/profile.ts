// Where the time of an execute_code goes. Each call of a sequential batch is cut into phases by
// timestamps taken in this process: the operator's own API requests (RequestTally), the round
// trips of its main API calls (CallTimer), a watch on the sandbox pods (PodTimeline) and the
// client's call/reply. No change to src/ is needed.
import { execInPod } from '../src/exec/exec.js';
import { newNonce, parseTrailer, runnerCommand } from '../src/exec/runner.js';
import { podNameForRun } from '../src/sandbox/names.js';
import type { KubeClients } from '../src/kube/clients.js';
import type { TestKube } from '../test/e2e/helpers/kube.js';
import type { RequestTally, TalliedRequest } from './api-requests.js';
import type { TimedCall } from './mcp.js';
import type { PodTimeline, PodTimes } from './sandbox-pod.js';
import { SANDBOX_CONTAINER } from './sandbox-pod.js';
import { rounded, summarize, type Summary } from './stats.js';

interface TimedApiCall {
  key: string;
  /** Name of the object created or patched, when the call names one. */
  name?: string;
  start: number;
  end: number;
}

function objectName(args: unknown[]): string | undefined {
  const p = args[0] as { name?: unknown; body?: { metadata?: { name?: unknown } } } | undefined;
  const name = p?.name ?? p?.body?.metadata?.name;
  return typeof name === 'string' ? name : undefined;
}

/** Round trips of chosen API client methods (instance wrappers; the library is untouched). */
export class CallTimer {
  readonly calls: TimedApiCall[] = [];

  constructor(clients: KubeClients) {
    this.wrap(clients.custom, 'createNamespacedCustomObject', 'create sandboxruns');
    this.wrap(clients.custom, 'patchNamespacedCustomObjectStatus', 'patch sandboxruns/status');
    this.wrap(clients.core, 'createNamespacedPod', 'create pods');
    this.wrap(clients.core, 'patchNamespacedPod', 'patch pods');
  }

  private wrap(api: object, method: string, key: string): void {
    const target = api as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const original = target[method]?.bind(api);
    if (!original) return;
    target[method] = async (...args: unknown[]): Promise<unknown> => {
      const start = performance.now();
      try {
        return await original(...args);
      } finally {
        this.calls.push({ key, name: objectName(args), start, end: performance.now() });
      }
    };
  }
}

/** Median round trip per wrapped method, between two instants. */
export function roundTrips(timer: CallTimer, from: number, to: number): Record<string, Summary> {
  const by = new Map<string, number[]>();
  for (const c of timer.calls) if (c.start >= from && c.end <= to) by.set(c.key, [...(by.get(c.key) ?? []), c.end - c.start]);
  return Object.fromEntries([...by].map(([k, v]) => [k, rounded(summarize(v))]));
}

/** Names of the pods created more than once between two instants (a run executed twice). */
export function podsCreatedTwice(timer: CallTimer, from: number, to: number): string[] {
  const seen = new Map<string, number>();
  for (const c of timer.calls) if (c.key === 'create pods' && c.name && c.start >= from && c.start <= to) seen.set(c.name, (seen.get(c.name) ?? 0) + 1);
  return [...seen].filter(([, n]) => n > 1).map(([name]) => name);
}

interface CallView {
  call: TimedCall;
  reqs: TalliedRequest[];
  timed: TimedApiCall[];
  pod: PodTimes;
}

type Mark = [phaseEndingHere: string, at: (v: CallView) => number | undefined];

const sent = (key: string) => (v: CallView): number | undefined => v.reqs.find((r) => r.key === key)?.t;
const done = (key: string, last = false) => (v: CallView): number | undefined => (last ? v.timed.filter((c) => c.key === key).at(-1) : v.timed.find((c) => c.key === key))?.end;
const lastSent = (key: string) => (v: CallView): number | undefined => v.timed.filter((c) => c.key === key).at(-1)?.start;

/**
 * Phases of a cold run (pool off): the operator creates, waits for and execs into a new pod.
 * Marks are request starts: the controller's watch can see the new SandboxRun and start the
 * executor before the gateway has the create response, so "create done" is no mark of its own
 * (the round trips are reported separately).
 */
export const COLD_MARKS: Mark[] = [
  ['MCP request → SandboxRun create sent', sent('create sandboxruns')],
  ['SandboxRun create → Pod create sent', sent('create pods')],
  ['Pod create → scheduled (watch)', (v) => v.pod.scheduled],
  // The operator's informer sees the pod Ready a few ms before this bench's watch does, so the
  // exec request is the mark: the first sign the operator saw it.
  ['scheduled → Ready → exec sent', sent('connect pods/exec')],
  ['exec (runner script + print(1))', lastSent('patch sandboxruns/status')],
  ['status patch round trip', done('patch sandboxruns/status', true)],
  ['status patch done → MCP reply', (v) => v.call.end],
];

/** Phases of a warm run: the operator claims a ready pool pod with one patch and execs into it. */
export const WARM_MARKS: Mark[] = [
  ['MCP request → SandboxRun create sent', sent('create sandboxruns')],
  ['SandboxRun create → claim patch sent', sent('patch pods')],
  ['claim patch → exec sent', sent('connect pods/exec')],
  ['exec (runner script + print(1))', lastSent('patch sandboxruns/status')],
  ['status patch round trip', done('patch sandboxruns/status', true)],
  ['status patch done → MCP reply', (v) => v.call.end],
];

export interface PhaseProfile {
  phasesMs: Record<string, Summary>;
  /** Calls whose status was patched twice (Running, then the result): code ran > 250 ms. */
  twoStatusPatches: number;
  profiled: number;
}

export function profileCalls(calls: readonly TimedCall[], tally: RequestTally, timer: CallTimer, pods: PodTimeline | undefined, marks: readonly Mark[]): PhaseProfile {
  const phases: number[][] = marks.map(() => []);
  let twoPatches = 0;
  let profiled = 0;
  for (const call of calls) {
    const v: CallView = {
      call,
      reqs: tally.between(call.start, call.end),
      timed: timer.calls.filter((c) => c.start >= call.start && c.end <= call.end),
      pod: pods?.timesOf(podNameForRun(call.run ?? '')) ?? {},
    };
    const at = [call.start, ...marks.map(([, f]) => f(v))];
    if (at.some((m) => m === undefined)) continue;
    profiled++;
    if (v.reqs.filter((r) => r.key === 'patch sandboxruns/status').length > 1) twoPatches++;
    for (let i = 0; i < marks.length; i++) phases[i]?.push((at[i + 1] as number) - (at[i] as number));
  }
  return {
    phasesMs: Object.fromEntries(marks.map(([p], i) => [p, rounded(summarize(phases[i] ?? []))])),
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
