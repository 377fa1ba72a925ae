import { describe, expect, it } from 'vitest';
import { parseSandboxRun } from '../../../src/api/v1alpha1/index.js';
import { ANNOTATION_EXECUTOR, AUDIT_EXECUTOR } from '../../../src/api/v1alpha1/labels.js';
import { AUDIT_CODE_MAX_BYTES, auditBatchStatus, auditEntry, auditRunBody, auditStatus, type AuditCall } from '../../../src/audit/record.js';
import { sessionOutcome } from '../../../src/runs/session-outcome.js';
import type { RunOutcome } from '../../../src/runs/types.js';

const outcome: RunOutcome = {
  runName: '',
  session: 's1',
  namespace: 'n',
  phase: 'Failed',
  reason: 'Exception',
  message: 'ValueError: secret-value',
  stdout: 'printed secret',
  stderr: 'trace',
  truncated: false,
  stdoutBytes: 14,
  stderrBytes: 5,
  durationMs: 12.6,
};
const call = (code: string): AuditCall => ({
  name: 'run-abc',
  namespace: 'n',
  session: 's1',
  owner: { user: 'alice', groups: ['dev'] },
  language: 'python',
  timeoutSeconds: 30,
  code,
  startedMs: Date.parse('2026-11-23T12:00:00Z'),
  endedMs: Date.parse('2026-11-23T12:00:01Z'),
  outcome,
});

describe('audit records of session calls', () => {
  it('record who, when, language, outcome and duration — and no output', () => {
    const e = auditEntry(call('x = 1'));
    const body = auditRunBody(e, 600) as Record<string, unknown>;
    const parsed = parseSandboxRun({ ...body, status: auditStatus(e) });
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    const r = parsed.run;
    expect(r.spec).toMatchObject({ owner: { user: 'alice', groups: ['dev'] }, language: 'python', session: 's1', code: 'x = 1', ttlSecondsAfterFinished: 600 });
    expect(r.metadata.labels).toMatchObject({ 'codemode.dev/owner': 'alice', 'codemode.dev/session': 's1' });
    expect(r.metadata.annotations?.[ANNOTATION_EXECUTOR]).toBe(AUDIT_EXECUTOR);
    expect(r.status).toMatchObject({
      phase: 'Failed',
      reason: 'Exception',
      durationMs: 13,
      startTime: '2026-11-23T12:00:00.000Z',
      completionTime: '2026-11-23T12:00:01.000Z',
      stdoutBytes: 14,
    });
    const text = JSON.stringify({ body, status: auditStatus(e) });
    for (const secret of ['printed secret', 'secret-value', 'trace']) expect(text).not.toContain(secret);
  });

  it.each([
    ['short code is kept whole', 'print(1)', 'print(1)'],
    ['long code is cut at the byte bound, on a character boundary', 'é'.repeat(AUDIT_CODE_MAX_BYTES), 'é'.repeat(AUDIT_CODE_MAX_BYTES / 2)],
  ])('%s', (_n, code, head) => {
    const e = auditEntry(call(code));
    expect(e.codeHead).toBe(head);
    expect(e.codeBytes).toBe(Buffer.byteLength(code));
    expect(e.codeSha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it('a record of one call is the plain record; of several, it lists each and sums them up', () => {
    const at = (i: number, o: Partial<RunOutcome>, code = `x = ${i}`): ReturnType<typeof auditEntry> =>
      auditEntry({
        ...call(code),
        name: `run-${i}`,
        startedMs: Date.parse('2026-11-23T12:00:00Z') + i * 1000,
        endedMs: Date.parse('2026-11-23T12:00:00Z') + i * 1000 + 10,
        outcome: { ...outcome, phase: 'Succeeded', reason: undefined, durationMs: 10, stdoutBytes: 2, stderrBytes: 0, ...o },
      });
    const one = at(0, {});
    expect(auditBatchStatus([one])).toEqual(auditStatus(one));

    const tools = (server: string, calls: number) => ({ calls, errors: 1, upstreamWaitMs: 5, servers: { [server]: { calls, errors: 1 } } });
    const entries = [
      at(0, { toolCalls: tools('a', 2) }),
      at(1, { phase: 'Failed', reason: 'Exception', exitCode: 1, truncated: true, toolCalls: tools('b', 1) }),
      at(2, { phase: 'TimedOut', reason: 'Timeout', display: [{ kind: 'image', mime: 'image/png', data: 'aGk=', bytes: 2 }], toolCalls: tools('a', 3) }),
    ];
    const status = auditBatchStatus(entries);
    expect(status).toMatchObject({
      phase: 'Failed',
      reason: 'Exception',
      exitCode: 1,
      startTime: '2026-11-23T12:00:00.000Z',
      completionTime: '2026-11-23T12:00:02.010Z',
      durationMs: 30,
      stdoutBytes: 6,
      truncated: true,
      toolCalls: {
        calls: 6,
        errors: 3,
        upstreamWaitMs: 15,
        servers: [
          { name: 'a', calls: 5, errors: 2 },
          { name: 'b', calls: 1, errors: 1 },
        ],
      },
    });
    expect(status.calls?.map((c) => [c.name, c.phase, c.reason, c.toolCalls])).toEqual([
      ['run-0', 'Succeeded', undefined, 2],
      ['run-1', 'Failed', 'Exception', 1],
      ['run-2', 'TimedOut', 'Timeout', 3],
    ]);
    expect(status.calls?.[1]).toMatchObject({ codeBytes: 5, codeSha256: entries[1]?.codeSha256, truncated: true });
    // The whole record is a valid SandboxRun, named after its first call, and holds no output.
    const parsed = parseSandboxRun({ ...(auditRunBody(entries[0] as never, 600) as object), status });
    expect(parsed.ok, parsed.ok ? '' : parsed.message).toBe(true);
    for (const secret of ['printed secret', 'secret-value', 'trace', 'aGk=']) expect(JSON.stringify(status)).not.toContain(secret);
  });

  it.each(['constructor', 'toString', '__proto__'])('a record sums the calls of a server named %s as any other', (server) => {
    const at = (i: number): ReturnType<typeof auditEntry> =>
      auditEntry({
        ...call(`x = ${i}`),
        name: `run-${i}`,
        outcome: { ...outcome, toolCalls: { calls: 2, errors: 1, upstreamWaitMs: 5, servers: { [server]: { calls: 2, errors: 1 } } } },
      });
    expect(auditBatchStatus([at(0), at(1)]).toolCalls?.servers).toEqual([{ name: server, calls: 4, errors: 2 }]);
    expect((Object as unknown as Record<string, unknown>).calls).toBeUndefined();
  });

  // A session call's duration and byte counts are its kernel's word (session code can forge its
  // frames): the duration is kept within what the gateway saw, the sums of a record exact integers.
  it.each([
    ['an honest duration is kept', 400, 1000, 400],
    ['a claim past the wall time is cut to it', Number.MAX_SAFE_INTEGER, 1000, 1000],
    ['a clock that stepped back keeps 0', 400, -5, 0],
  ])('%s', (_n, durationMs, wallMs, want) => {
    const started = Date.parse('2026-11-23T12:00:00Z');
    const e = auditEntry({ ...call('x = 1'), startedMs: started, endedMs: started + wallMs, outcome: { ...outcome, durationMs } });
    expect(e.outcome.durationMs).toBe(want);
  });

  it('a record of calls that each claim 2^53 ms and bytes is still a valid SandboxRun', () => {
    const huge = Number.MAX_SAFE_INTEGER;
    const entries = Array.from({ length: 100 }, (_, i) =>
      auditEntry({ ...call(`x = ${i}`), name: `run-${i}`, outcome: { ...outcome, durationMs: huge, stdoutBytes: huge, stderrBytes: huge } }),
    );
    const status = auditBatchStatus(entries);
    expect(status).toMatchObject({ durationMs: 100 * 1000, stdoutBytes: huge, stderrBytes: huge });
    const parsed = parseSandboxRun({ ...(auditRunBody(entries[0] as never, 600) as object), status });
    expect(parsed.ok, parsed.ok ? '' : parsed.message).toBe(true);
  });

  it('a record of a session call whose kernel claims 2^53 bytes of stderr besides a traceback is still a valid SandboxRun', () => {
    // The traceback joins stderr and its bytes are added to the kernel's count (session-outcome.ts).
    const forged = sessionOutcome(
      {
        status: 'error',
        error: { ename: 'ValueError', evalue: 'x', traceback: 'Traceback: not in stderr' },
        stdout: '',
        stderr: '',
        stdoutBytes: Number.MAX_SAFE_INTEGER,
        stderrBytes: Number.MAX_SAFE_INTEGER,
        truncated: false,
        durationMs: 1,
        session: 's1',
        capChars: 50_000,
      },
      'n',
      30,
    );
    const one = auditEntry({ ...call('x = 1'), outcome: forged });
    const two = [one, auditEntry({ ...call('x = 2'), name: 'run-def', outcome: forged })];
    for (const status of [auditStatus(one), auditBatchStatus(two)]) {
      const parsed = parseSandboxRun({ ...(auditRunBody(one, 600) as object), status });
      expect(parsed.ok, parsed.ok ? '' : parsed.message).toBe(true);
    }
  });
});
