// What RunRecorder writes from text the sandbox controls: a status the API server cannot refuse for
// its messages' length, and outcome Events without the program's own text, within an Event's size.
// And which failed status writes it retries: a recording fake of the client stands in for the API
// server here (what the API server answers is tested against a real one elsewhere).
import type { Logger } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  isMinimalStatus,
  MAX_MESSAGE_LENGTH,
  Reasons,
  SandboxRunStatusSchema,
  type SandboxRun,
  type SandboxRunStatus,
} from '../../../src/api/v1alpha1/index.js';
import type { EventRecorder } from '../../../src/kube/events.js';
import type { KubeClients } from '../../../src/kube/clients.js';
import { RunRecorder, type StatusWrite } from '../../../src/runs/record.js';
import { EVENT_NOTES, classifyExecution, completedStatus, type Classification } from '../../../src/runs/status.js';

const limits = { maxTimeoutSeconds: 300, memoryLimit: '512Mi', maxMemory: '2Gi', workspaceSizeLimit: '512Mi', tmpSizeLimit: '128Mi' };
const run: SandboxRun = {
  apiVersion: 'codemode.dev/v1alpha1',
  kind: 'SandboxRun',
  metadata: { name: 'r', namespace: 'ns', uid: 'u1', generation: 1, creationTimestamp: '2026-11-22T09:59:00Z' },
  spec: { language: 'python', code: 'print(1)', timeoutSeconds: 30 },
};

function recorder(): { rec: RunRecorder; record: ReturnType<typeof vi.fn> } {
  const record = vi.fn();
  const rec = new RunRecorder({ clients: {} as KubeClients, events: { record } as unknown as EventRecorder, namespace: 'ns', outputCapBytes: 65536 });
  return { rec, record };
}

/** A kernel "run" answered with an error result whose evalue fills the output cap (50000 by default). */
function forgedError(evalue: string): Classification {
  return classifyExecution(
    {
      exitCode: undefined,
      timedOut: false,
      oomKilled: false,
      runnerReported: false,
      watchdogFired: false,
      podGone: false,
      execError: `KernelError: ${evalue}`,
    },
    30,
    limits,
  );
}

/** Characters as the API server counts them (code points). */
const chars = (s: string): number => [...s].length;

describe('RunRecorder.fit bounds the messages the sandbox can fill', () => {
  it.each([
    ['ASCII', 'x'.repeat(50_000)],
    ['astral', '😀'.repeat(40_000)],
    ['at the bound', 'y'.repeat(MAX_MESSAGE_LENGTH)],
  ])('%s evalue: message and conditions within the CRD bound', (_name, evalue) => {
    const { rec } = recorder();
    const c = forgedError(evalue);
    const status = rec.fit(run, completedStatus(run, c, { stdout: 'out', stderr: '', stdoutBytes: 3, stderrBytes: 0, truncated: false }, { end: new Date() }));
    expect(status.message?.length).toBeLessThanOrEqual(MAX_MESSAGE_LENGTH);
    expect(chars(status.message ?? '')).toBeLessThanOrEqual(MAX_MESSAGE_LENGTH);
    for (const x of status.conditions ?? []) expect(x.message.length).toBeLessThanOrEqual(MAX_MESSAGE_LENGTH);
    expect(SandboxRunStatusSchema.safeParse(status).success).toBe(true);
    // The outputs are kept: no fallback to a minimal status is needed.
    expect(status.stdout).toBe('out');
    expect(status.message).toMatch(/^The connection to the sandbox broke/);
  });

  it('leaves short messages alone', () => {
    const { rec } = recorder();
    const c = forgedError('boom');
    const status = rec.fit(run, completedStatus(run, c, undefined, { end: new Date() }));
    expect(status.message).toBe(c.message);
  });
});

describe('RunRecorder.recordOutcome', () => {
  const facts = { exitCode: undefined, timedOut: false, oomKilled: false, runnerReported: false, watchdogFired: false, podGone: false };
  it.each<[string, Pick<Classification, 'phase' | 'reason' | 'message' | 'note'>, (note: string) => void]>([
    [
      "an exec refused with the kernel's text: the Event points at the status",
      classifyExecution({ ...facts, execError: 'KernelError: forged-by-the-pod', codeSent: false }, 30, limits),
      (note) => expect(note).toBe(EVENT_NOTES.execFailed),
    ],
    [
      "an exec broken after the code was sent, with the kernel's text: likewise",
      classifyExecution({ ...facts, execError: 'KernelError: forged-by-the-pod', codeSent: true }, 30, limits),
      (note) => expect(note).not.toContain('forged-by-the-pod'),
    ],
    [
      'a message of the gateway is the note',
      { phase: 'TimedOut', reason: Reasons.TimedOut, message: 'The code ran longer than timeoutSeconds=30 and was stopped.' },
      (note) => expect(note).toBe('The code ran longer than timeoutSeconds=30 and was stopped.'),
    ],
  ])('%s', (_name, c, check) => {
    const { rec, record } = recorder();
    rec.recordOutcome(run, c);
    expect(record).toHaveBeenCalledTimes(1);
    check(record.mock.calls[0]?.[4] as string);
  });
});

describe('RunRecorder.patchStatus: what it retries, and what it gives up', () => {
  afterEach(() => {
    vi.useRealTimers();
  });
  // client-node's ApiException: the status in `code`, the API server's Status as a JSON string in `body`.
  const apiErr = (code: number, message = 'x'): Error => Object.assign(new Error(`HTTP-Code: ${code}`), { code, body: JSON.stringify({ message }) });
  const sysErr = (code: string): Error => Object.assign(new Error(`read ${code}`), { code });
  const OUTPUT = 'the-program-output-never-logged';

  /** A client whose status patches fail with `err` `failures` times, then land; deletes succeed. */
  function client(err: unknown, failures: number): { clients: KubeClients; patches: SandboxRunStatus[]; deletes: string[] } {
    const patches: SandboxRunStatus[] = [];
    const deletes: string[] = [];
    const custom = {
      patchNamespacedCustomObjectStatus: (req: { body: { status: SandboxRunStatus } }): Promise<object> => {
        patches.push(req.body.status);
        return patches.length <= failures ? Promise.reject(err) : Promise.resolve({});
      },
      deleteNamespacedCustomObject: (req: { name: string }): Promise<object> => {
        deletes.push(req.name);
        return Promise.resolve({});
      },
    };
    return { clients: { custom } as unknown as KubeClients, patches, deletes };
  }

  /** Full: the status as asked for; minimal: outputs cut, only the finishing conditions (minimalStatus). */
  const shape = (s: SandboxRunStatus): 'full' | 'minimal' => (isMinimalStatus(s) ? 'minimal' : 'full');

  const FOREVER = Number.POSITIVE_INFINITY;
  it.each<[string, unknown, number, StatusWrite | 'still retrying', ('full' | 'minimal')[] | 'full, over and over', boolean]>([
    // [what, error, failures before it lands, result, the statuses sent, the run deleted]
    ['500: retried until it lands', apiErr(500), 3, 'landed', ['full', 'full', 'full', 'full'], false],
    ['503 while the API server restarts: retried', apiErr(503), 3, 'landed', ['full', 'full', 'full', 'full'], false],
    ['429: overloaded, retried', apiErr(429), 3, 'landed', ['full', 'full', 'full', 'full'], false],
    ['409: a conflict, retried', apiErr(409), 3, 'landed', ['full', 'full', 'full', 'full'], false],
    ['a network error (ECONNRESET): retried', sysErr('ECONNRESET'), 3, 'landed', ['full', 'full', 'full', 'full'], false],
    [
      "fetch's TypeError with ECONNRESET as its cause: retried",
      new TypeError('fetch failed', { cause: sysErr('ECONNRESET') }),
      2,
      'landed',
      ['full', 'full', 'full'],
      false,
    ],
    [
      'a request timeout (TimeoutError): retried',
      new DOMException('The operation was aborted due to timeout', 'TimeoutError'),
      2,
      'landed',
      ['full', 'full', 'full'],
      false,
    ],
    ['422: invalid — the minimal status once, then given up', apiErr(422), FOREVER, 'refused', ['full', 'minimal'], false],
    ['403: not allowed (RBAC) — likewise', apiErr(403), FOREVER, 'refused', ['full', 'minimal'], false],
    ['400: a bad request — likewise', apiErr(400), FOREVER, 'refused', ['full', 'minimal'], false],
    [
      'a TypeError thrown by the client — likewise, not retried for ever',
      new TypeError("Cannot read properties of undefined (reading 'name')"),
      FOREVER,
      'refused',
      ['full', 'minimal'],
      false,
    ],
    ['a RangeError building the body — likewise', new RangeError('Invalid string length'), FOREVER, 'refused', ['full', 'minimal'], false],
    ['422, then the minimal status lands', apiErr(422), 1, 'landed', ['full', 'minimal'], false],
    ['413: too large — the minimal status, then the run is deleted', apiErr(413), FOREVER, 'gone', ['full', 'minimal'], true],
    ["etcd's request is too large (a 500): likewise, not retried", apiErr(500, 'etcdserver: request is too large'), FOREVER, 'gone', ['full', 'minimal'], true],
    ['404: the run was deleted meanwhile', apiErr(404), FOREVER, 'gone', ['full'], false],
    ['503 that never ends: still retrying after 10 minutes', apiErr(503), FOREVER, 'still retrying', 'full, over and over', false],
  ])('%s', async (_what, err, failures, expected, sent, deleted) => {
    vi.useFakeTimers();
    const { clients, patches, deletes } = client(err, failures);
    const log = { warn: vi.fn(), error: vi.fn(), info: vi.fn(), debug: vi.fn() };
    const rec = new RunRecorder({ clients, events: { record: vi.fn() } as unknown as EventRecorder, namespace: 'ns', outputCapBytes: 65536 });
    const c = classifyExecution({ exitCode: 0, timedOut: false, oomKilled: false, runnerReported: true, watchdogFired: false, podGone: false }, 30, limits);
    const status = completedStatus(run, c, { stdout: OUTPUT, stderr: '', stdoutBytes: OUTPUT.length, stderrBytes: 0, truncated: false }, { end: new Date() });
    const written = rec.patchStatus(run, status, log as unknown as Logger);
    // Backoff waits pass in fake time; a write still looping after 10 minutes is "still retrying".
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    const result = await Promise.race([written, Promise.resolve('still retrying' as const)]);
    expect(result).toBe(expected);
    if (sent === 'full, over and over') {
      // The backoff is capped at 30 s: about 20 attempts in 10 minutes, all of the full status.
      expect(patches.length).toBeGreaterThan(15);
      expect(new Set(patches.map(shape))).toEqual(new Set(['full']));
    } else expect(patches.map(shape)).toEqual(sent);
    expect(deletes).toEqual(deleted ? ['r'] : []);
    if (expected === 'refused') expect(log.error).toHaveBeenCalledTimes(1);
    // The status holds the program's output: no log line quotes it.
    expect(JSON.stringify([log.warn.mock.calls, log.error.mock.calls])).not.toContain(OUTPUT);
    // A minimal status says why the output is missing: too large, or refused for another reason.
    const minimal = patches.find((p) => shape(p) === 'minimal');
    if (minimal) expect(minimal.message).toMatch(deleted ? /the SandboxRun is too large\.$/ : /the API server refused the full status\.$/);
  });
});
