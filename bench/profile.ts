// Where the time of an execute_code goes. Each call of a sequential batch is cut into phases by
// timestamps taken in this process: the operator's own API requests (RequestTally), the round
// trips of its API calls and exec streams (CallTimer), a watch on the sandbox pods (PodTimeline)
// and the client's call/reply. No change to src/ is needed.
//
// The reply no longer waits for the final status patch, the pod delete or the completion Event:
// they start after the outcome is known, so they are no phase of a call (their round trips are
// in roundTrips()). A warm run's exec stream (the kernel relay) is opened when the pool pod
// becomes ready, before any run claims it: it is no phase of a warm call either.
import { execInPod } from '../src/exec/exec.js';
import { newNonce, parseTrailer, runnerCommand } from '../src/exec/runner.js';
import { podNameForRun } from '../src/sandbox/names.js';
import type { KubeClients } from '../src/kube/clients.js';
import type { TestKube } from '../test/e2e/helpers/kube.js';
import { WRITE_VERBS, perRun, type Counts, type RequestTally, type TalliedRequest } from './api-requests.js';
import type { TimedCall } from './mcp.js';
import type { PodTimeline, PodTimes } from './sandbox-pod.js';
import { SANDBOX_CONTAINER } from './sandbox-pod.js';
import { rounded, summarize, type Summary } from './stats.js';

interface TimedApiCall {
  key: string;
  /** Name of the object created, patched or deleted (the pod, for an exec), when the call names one. */
  name?: string;
  /** The SandboxRun the object is for: owner of a created or claimed pod, subject of an Event. */
  about?: string;
  /** The pod a SandboxRun status patch names (status.podName). */
  pod?: string;
  start: number;
  /** The response; for an exec, the moment its websocket is open. */
  end: number;
  ok: boolean;
}

/** A kernel relay exec (the long-lived stream to a pool pod's kernel) and its traffic. */
export interface KernelStream {
  pod: string;
  /** The exec call started (websocket requested). */
  start: number;
  /** The first frame from the kernel (the pong of KernelConnection.open): the stream is usable. */
  ready?: number;
  /** When the gateway wrote request frames (ping, run) and received frames (output, result). */
  sent: number[];
  received: number[];
}

interface CallParams {
  name?: unknown;
  body?: {
    metadata?: { name?: unknown; ownerReferences?: Array<{ name?: unknown }> };
    regarding?: { name?: unknown };
    status?: { podName?: unknown };
  };
}

const str = (x: unknown): string | undefined => (typeof x === 'string' ? x : undefined);
const objectName = (p: CallParams | undefined): string | undefined => str(p?.name) ?? str(p?.body?.metadata?.name);
const aboutRun = (p: CallParams | undefined): string | undefined => str(p?.body?.metadata?.ownerReferences?.[0]?.name) ?? str(p?.body?.regarding?.name);
const statusPod = (p: CallParams | undefined): string | undefined => str(p?.body?.status?.podName);
const isWriteKey = (key: string): boolean => WRITE_VERBS.has(key.split(' ')[0] ?? '');

/** Patches `write` of one stream instance to timestamp every chunk (the stream is untouched otherwise). */
function stampWrites(stream: unknown, stamp: (t: number) => void): void {
  const w = stream as { write?: unknown } | null;
  if (typeof w?.write !== 'function') return;
  const write = (w.write as (...a: unknown[]) => boolean).bind(w);
  w.write = (...a: unknown[]): boolean => {
    stamp(performance.now());
    return write(...a);
  };
}

/**
 * Round trips of the operator's API calls and exec streams (instance wrappers on its clients; the
 * library is untouched). Every write a run can make is wrapped, so a call's writes can be counted.
 */
export class CallTimer {
  readonly calls: TimedApiCall[] = [];
  /** Kernel relay execs by pod (warm pool pods). */
  readonly streams = new Map<string, KernelStream>();

  constructor(clients: KubeClients) {
    this.wrap(clients.custom, 'createNamespacedCustomObject', 'create sandboxruns');
    this.wrap(clients.custom, 'patchNamespacedCustomObjectStatus', 'patch sandboxruns/status');
    this.wrap(clients.core, 'createNamespacedPod', 'create pods');
    this.wrap(clients.core, 'patchNamespacedPod', 'patch pods');
    this.wrap(clients.core, 'deleteNamespacedPod', 'delete pods');
    this.wrap(clients.events, 'createNamespacedEvent', 'create events');
    this.wrap(clients.networking, 'readNamespacedNetworkPolicy', 'get networkpolicies');
    this.wrap(clients.networking, 'createNamespacedNetworkPolicy', 'create networkpolicies');
    this.wrapExec(clients);
  }

  private wrap(api: object, method: string, key: string): void {
    const target = api as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const original = target[method]?.bind(api);
    if (!original) return;
    target[method] = (...args: unknown[]): Promise<unknown> => {
      const p = args[0] as CallParams | undefined;
      return this.timed({ key, name: objectName(p), about: aboutRun(p), pod: statusPod(p) }, performance.now(), () => original(...args));
    };
  }

  /** Runs `call` and records its round trip, from `start`, and whether it succeeded. */
  private async timed<T>(what: Pick<TimedApiCall, 'key' | 'name' | 'about' | 'pod'>, start: number, call: () => Promise<T>): Promise<T> {
    let ok = false;
    try {
      const r = await call();
      ok = true;
      return r;
    } finally {
      this.calls.push({ ...what, start, end: performance.now(), ok });
    }
  }

  /**
   * Exec.exec(namespace, pod, container, command, stdout, stderr, stdin, ...): resolves when the
   * websocket is open. For a kernel relay (warm pool pods) the frames in both directions are
   * timestamped too: the first frame back is the pong that makes the connection usable.
   */
  private wrapExec(clients: KubeClients): void {
    const exec = clients.exec as unknown as { exec: (...args: unknown[]) => Promise<unknown> };
    const original = exec.exec.bind(clients.exec);
    exec.exec = (...args: unknown[]): Promise<unknown> => {
      const pod = str(args[1]);
      const command = Array.isArray(args[3]) ? (args[3] as unknown[]) : [];
      const start = performance.now();
      if (pod && command.some((a) => typeof a === 'string' && /\/relay\.(py|js)$/.test(a))) {
        const s: KernelStream = { pod, start, sent: [], received: [] };
        this.streams.set(pod, s);
        stampWrites(args[4], (t) => {
          s.ready ??= t;
          s.received.push(t);
        });
        stampWrites(args[6], (t) => s.sent.push(t));
      }
      return this.timed({ key: 'connect pods/exec', name: pod }, start, () => original(...args));
    };
  }

  /** The pool pod a run claimed (its successful claim patch), if any. */
  claimedBy(run: string): TimedApiCall | undefined {
    return this.calls.find((c) => c.key === 'patch pods' && c.ok && c.about === run);
  }

  /**
   * The pool pod a warm run executed in: the one it claimed, or else the one its status names (a
   * run in this process's reserved pod patches no pod before its status; the pod is deleted after).
   */
  podOf(run: string): string | undefined {
    return this.claimedBy(run)?.name ?? this.calls.find((c) => c.key === 'patch sandboxruns/status' && c.ok && c.name === run && c.pod !== undefined)?.pod;
  }
}

/** Median round trip per wrapped method, between two instants ("connect pods/exec": to the open websocket). */
export function roundTrips(timer: CallTimer, from: number, to: number): Record<string, Summary> {
  const by = new Map<string, number[]>();
  for (const c of timer.calls) if (c.start >= from && c.end <= to) by.set(c.key, [...(by.get(c.key) ?? []), c.end - c.start]);
  return Object.fromEntries([...by].sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => [k, rounded(summarize(v))]));
}

/** Names of the pods created more than once between two instants (a cold run executed twice). */
export function podsCreatedTwice(timer: CallTimer, from: number, to: number): string[] {
  const seen = new Map<string, number>();
  for (const c of timer.calls) if (c.key === 'create pods' && c.name && c.start >= from && c.start <= to) seen.set(c.name, (seen.get(c.name) ?? 0) + 1);
  return [...seen].filter(([, n]) => n > 1).map(([name]) => name);
}

/** Runs that claimed more than one pool pod between two instants (a warm run executed twice). */
export function runsClaimedTwice(timer: CallTimer, from: number, to: number): string[] {
  const seen = new Map<string, number>();
  for (const c of timer.calls)
    if (c.key === 'patch pods' && c.ok && c.about && c.start >= from && c.start <= to) seen.set(c.about, (seen.get(c.about) ?? 0) + 1);
  return [...seen].filter(([, n]) => n > 1).map(([run]) => run);
}

export interface WritesBeforeReply {
  /** Per call: the writes for its run that started and completed between the call and its reply. */
  perCall: Summary;
  /** The same, per key, averaged over the calls. */
  byKey: Counts;
  calls: number;
}

/**
 * The measured counterpart of the static hot path, for sequential calls: per call, the operator
 * writes for that call's run (its SandboxRun, its pod or claimed pool pod, its Events; the
 * namespace's NetworkPolicy) that started after the call and completed before the reply.
 * Writes of the previous run that spill into the next call (its completion Event, pod delete) and
 * pool refills are not counted. An upper bound of what the reply waits for: a fire-and-forget write
 * that happens to finish before the reply (the Started Event, a Running status patch) counts too,
 * so the per-key split says which writes they were.
 */
export function writesBeforeReply(calls: readonly TimedCall[], timer: CallTimer): WritesBeforeReply {
  const counts: number[] = [];
  const byKey: Counts = {};
  for (const call of calls) {
    const run = call.run;
    if (!run) continue;
    const claimed = timer.podOf(run);
    const pods = new Set([podNameForRun(run), ...(claimed ? [claimed] : [])]);
    const mine = timer.calls.filter(
      (c) =>
        isWriteKey(c.key) &&
        c.start >= call.start &&
        c.end <= call.end &&
        (c.key.endsWith(' networkpolicies') || c.about === run || c.name === run || (c.name !== undefined && pods.has(c.name))),
    );
    counts.push(mine.length);
    for (const c of mine) byKey[c.key] = (byKey[c.key] ?? 0) + 1;
  }
  return { perCall: rounded(summarize(counts)), byKey: perRun(byKey, Math.max(1, counts.length)), calls: counts.length };
}

interface CallView {
  call: TimedCall;
  reqs: TalliedRequest[];
  timed: TimedApiCall[];
  pod: PodTimes;
}

type Mark = [phaseEndingHere: string, at: (v: CallView) => number | undefined];

const sent =
  (key: string) =>
  (v: CallView): number | undefined =>
    v.reqs.find((r) => r.key === key)?.t;
const done =
  (key: string, last = false) =>
  (v: CallView): number | undefined =>
    (last ? v.timed.filter((c) => c.key === key).at(-1) : v.timed.find((c) => c.key === key))?.end;

/**
 * Phases of a cold run (pool off): create the SandboxRun, (NetworkPolicy once per namespace),
 * create the pod, wait for Ready, one exec of the runner script; then the reply. Marks are request
 * starts where the operator's own view matters: the exec request is the first sign the operator
 * saw the pod Ready (its informer sees it a few ms before this bench's watch does).
 */
export const COLD_MARKS: Mark[] = [
  ['MCP request → SandboxRun create sent', sent('create sandboxruns')],
  ['SandboxRun create → Pod create sent', sent('create pods')],
  ['Pod create → scheduled (watch)', (v) => v.pod.scheduled],
  ['scheduled → Ready → exec sent', sent('connect pods/exec')],
  ['exec sent → exec stream open', done('connect pods/exec')],
  ['stream open → MCP reply (runner + print(1))', (v) => v.call.end],
];

/**
 * Phases of a warm run (pool on): create the SandboxRun, claim a ready pool pod with one patch,
 * then one framed "run" request over the kernel stream opened before the claim; then the reply.
 */
// Without a reservation the claim patch follows the create and precedes the run frame; with this
// process's reserved pod no pod write comes before the reply (its adoption follows the outcome).
export const WARM_MARKS: Mark[] = [
  ['MCP request → SandboxRun create sent', sent('create sandboxruns')],
  ['SandboxRun create round trip', done('create sandboxruns')],
  ['create done → MCP reply (the claim unless reserved, what is left of the code, the reply)', (v) => v.call.end],
];

export interface PhaseProfile {
  phasesMs: Record<string, Summary>;
  /** Calls whose run also had a Running status patch (the code ran > 250 ms). */
  runningStatusPatches: number;
  profiled: number;
  /** Calls left out, by the first mark that was missing (a mark that no longer exists drops every call). */
  skipped: Record<string, number>;
}

export function profileCalls(
  calls: readonly TimedCall[],
  tally: RequestTally,
  timer: CallTimer,
  pods: PodTimeline | undefined,
  marks: readonly Mark[],
): PhaseProfile {
  const phases: number[][] = marks.map(() => []);
  const skipped: Record<string, number> = {};
  let running = 0;
  let profiled = 0;
  for (const call of calls) {
    const v: CallView = {
      call,
      reqs: tally.between(call.start, call.end),
      timed: timer.calls.filter((c) => c.start >= call.start && c.end <= call.end),
      pod: pods?.timesOf(podNameForRun(call.run ?? '')) ?? {},
    };
    const at = [call.start, ...marks.map(([, f]) => f(v))];
    const missing = at.findIndex((m) => m === undefined);
    if (missing >= 0) {
      const mark = marks[missing - 1]?.[0] ?? '?';
      skipped[mark] = (skipped[mark] ?? 0) + 1;
      continue;
    }
    profiled++;
    // The final status patch is always there (after the reply); a second one is the Running patch.
    if (timer.calls.filter((c) => c.key === 'patch sandboxruns/status' && c.name === call.run).length > 1) running++;
    for (let i = 0; i < marks.length; i++) phases[i]?.push((at[i + 1] as number) - (at[i] as number));
  }
  return {
    phasesMs: Object.fromEntries(marks.map(([p], i) => [p, rounded(summarize(phases[i] ?? []))])),
    runningStatusPatches: running,
    profiled,
    skipped,
  };
}

export interface KernelSplit {
  /** Warm calls whose claimed pod's kernel stream was found. */
  calls: number;
  /** Of those, the calls whose stream had answered its ping before the claim completed. */
  streamReadyBeforeClaim: number;
  /** Of those, the calls whose stream was (re)opened only after the call started: exec set-up on the path. */
  streamOpenedOnPath: number;
  /** Of those, the calls whose run frame went before the create's answer (a reserved pod). */
  runBeforeCreated: number;
  /** From the create sent to the MCP reply, split at the run frame sent and the last frame received. */
  phasesMs: Record<string, Summary>;
}

/** The kernel part of warm calls, from the frames on the claimed pod's relay stream. */
export function kernelSplit(calls: readonly TimedCall[], timer: CallTimer): KernelSplit {
  const toRun: number[] = [];
  const kernel: number[] = [];
  const reply: number[] = [];
  const afterCreate: number[] = [];
  let ready = 0;
  let onPath = 0;
  let overlapped = 0;
  for (const call of calls) {
    const pod = call.run ? timer.podOf(call.run) : undefined;
    const created = timer.calls.find((c) => c.key === 'create sandboxruns' && c.ok && c.name === call.run && c.start >= call.start);
    const s = pod ? timer.streams.get(pod) : undefined;
    if (!s || !created) continue;
    // The run frame is the last one written (a stream reopened on the path writes its ping first).
    // In a reserved pod it goes while the create is on its way (executeWhileCreating).
    const runSent = s.sent.filter((t) => t >= created.start && t <= call.end).at(-1);
    const lastIn = s.received.filter((t) => runSent !== undefined && t >= runSent && t <= call.end).at(-1);
    if (runSent === undefined || lastIn === undefined) continue;
    if (s.ready !== undefined && s.ready <= created.end) ready++;
    if (s.start >= call.start) onPath++;
    if (runSent < created.end) overlapped++;
    toRun.push(runSent - created.start);
    kernel.push(lastIn - runSent);
    afterCreate.push(lastIn - created.end);
    reply.push(call.end - lastIn);
  }
  return {
    calls: toRun.length,
    streamReadyBeforeClaim: ready,
    streamOpenedOnPath: onPath,
    runBeforeCreated: overlapped,
    phasesMs: {
      'SandboxRun create sent → run frame sent (before the answer in a reserved pod; else the answer and the claim)': rounded(summarize(toRun)),
      'run frame → result frame received': rounded(summarize(kernel)),
      'create answered → result frame received (< 0: the code ended first)': rounded(summarize(afterCreate)),
      'result frame → MCP reply': rounded(summarize(reply)),
    },
  };
}

/**
 * A cold call's exec stream to its pod's kernel, cut at the gateway: the relay exec requested
 * (after Ready) → the kernel's pong (websocket, runc exec, relay start, kernel listening) → the run
 * frame sent → the result frame → the MCP reply.
 */
export interface ColdKernelSplit {
  calls: number;
  phasesMs: Record<string, Summary>;
}

export function coldKernelSplit(calls: readonly TimedCall[], timer: CallTimer): ColdKernelSplit {
  const toPong: number[] = [];
  const toRun: number[] = [];
  const kernel: number[] = [];
  const reply: number[] = [];
  for (const call of calls) {
    const s = call.run ? timer.streams.get(podNameForRun(call.run)) : undefined;
    if (!s || s.ready === undefined || s.start < call.start) continue;
    const runSent = s.sent.filter((t) => t >= (s.ready as number) && t <= call.end).at(-1);
    const lastIn = s.received.filter((t) => runSent !== undefined && t >= runSent && t <= call.end).at(-1);
    if (runSent === undefined || lastIn === undefined) continue;
    toPong.push(s.ready - s.start);
    toRun.push(runSent - s.ready);
    kernel.push(lastIn - runSent);
    reply.push(call.end - lastIn);
  }
  return {
    calls: toPong.length,
    phasesMs: {
      'relay exec requested → pong (websocket, runc exec, relay, kernel)': rounded(summarize(toPong)),
      'pong → run frame sent': rounded(summarize(toRun)),
      'run frame → result frame received': rounded(summarize(kernel)),
      'result frame → MCP reply': rounded(summarize(reply)),
    },
  };
}

export interface ExecSplit {
  rawPythonMs: Summary;
  runnerPythonMs: Summary;
}

/**
 * The cold path's exec (the runner script: mktemp, dd of the code from stdin, timeout, python3, a
 * trailer) against `python3 -c 'print(1)'`, both through src/exec's execInPod, interleaved, in
 * one running pod: what the runner adds on top of the raw exec. (Warm runs use no exec: they go
 * through the pool pod's kernel.)
 */
export async function execSplit(k: TestKube, ns: string, pod: string, n: number): Promise<ExecSplit> {
  const raw: number[] = [];
  const runner: number[] = [];
  const code = Buffer.from('print(1)\n');
  for (let i = 0; i < n + 3; i++) {
    const r1 = await execInPod(k.exec, {
      namespace: ns,
      pod,
      container: SANDBOX_CONTAINER,
      command: ['python3', '-c', 'print(1)'],
      capChars: 1000,
      watchdogMs: 30_000,
    });
    const nonce = newNonce();
    const r2 = await execInPod(k.exec, {
      namespace: ns,
      pod,
      container: SANDBOX_CONTAINER,
      command: runnerCommand('python', 30, code.length, nonce),
      stdin: code,
      capChars: 1000,
      watchdogMs: 30_000,
    });
    if (r1.exitCode !== 0 || parseTrailer(r2.stderrTail, nonce)?.exitCode !== 0)
      throw new Error(`exec split failed: ${r1.error ?? ''} ${r2.error ?? r2.stderr.text}`);
    if (i < 3) continue;
    raw.push(r1.durationMs);
    runner.push(r2.durationMs);
  }
  return { rawPythonMs: rounded(summarize(raw)), runnerPythonMs: rounded(summarize(runner)) };
}
