// What RunRecorder writes from text the sandbox controls: a status the API server cannot refuse for
// its messages' length, and outcome Events without the program's own text, within an Event's size.
import { describe, expect, it, vi } from 'vitest';
import { MAX_MESSAGE_LENGTH, Reasons, SandboxRunStatusSchema, type SandboxRun } from '../../../src/api/v1alpha1/index.js';
import type { EventRecorder } from '../../../src/kube/events.js';
import type { KubeClients } from '../../../src/kube/clients.js';
import { RunRecorder } from '../../../src/runs/record.js';
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
