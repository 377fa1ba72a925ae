// Session outcomes when a call met a bound (process cap, disk, memory, eviction).
import { describe, expect, it } from 'vitest';
import { sessionOutcome } from '../../../src/runs/session-outcome.js';
import type { SessionCallResult } from '../../../src/sessions/service.js';
import { NO_OUTPUT, lostTo } from '../../../src/sessions/verdict.js';
import { workspaceOverText } from '../../../src/sandbox/pod-failure.js';
import { parseKernelFrame, sanitizeResult, type ResultFrame } from '../../../src/exec/frames.js';

const result = (r: Partial<SessionCallResult>): SessionCallResult => ({
  status: 'ok',
  stdout: '',
  stderr: '',
  stdoutBytes: 0,
  stderrBytes: 0,
  truncated: false,
  durationMs: 1,
  session: 's1',
  capChars: 50000,
  ...r,
});
const error = { ename: 'OSError', evalue: 'x', traceback: 'Traceback\n' };

describe('sessionOutcome', () => {
  it.each([
    ['ok', result({}), 'Succeeded', undefined],
    ['bash exit 2', result({ exitCode: 2 }), 'Failed', 'NonZeroExit'],
    ['exception', result({ status: 'error', error }), 'Failed', 'Exception'],
    ['timeout', result({ status: 'timeout' }), 'TimedOut', 'DeadlineExceeded'],
    ['lost', result({ status: 'lost', error: { ename: 'KernelLost', evalue: 'x', traceback: '' } }), 'Failed', 'KernelLost'],
    // Bounds (issue 14): the bound explains a failed call; a call that met one and succeeded did.
    ['fork failed, exception', result({ status: 'error', error, processLimit: true }), 'Failed', 'ProcessLimit'],
    ['fork bomb stopped at the timeout', result({ status: 'timeout', processLimit: true }), 'Failed', 'ProcessLimit'],
    ['fork failed, bash exit 1', result({ exitCode: 1, processLimit: true }), 'Failed', 'ProcessLimit'],
    ['fork failed, still exit 0', result({ exitCode: 0, processLimit: true }), 'Failed', 'ProcessLimit'],
    ['/tmp full, exception', result({ status: 'error', error, diskFull: 'tmp' }), 'Failed', 'DiskFull'],
    ['/workspace full, bash exit 1', result({ exitCode: 1, diskFull: 'workspace' }), 'Failed', 'DiskFull'],
    ['unknown volume from the pod', result({ exitCode: 1, diskFull: 'etc' }), 'Failed', 'NonZeroExit'],
    ['subprocess OOM-killed, bash exit 137', result({ exitCode: 137, oomKilled: true }), 'Failed', 'OOMKilled'],
    ['interpreter OOM-killed', lostTo({ reason: 'OOMKilled', detail: 'the container was OOM-killed.' }, 's1'), 'Failed', 'OOMKilled'],
    ['pod evicted', lostTo({ reason: 'Evicted', detail: 'Usage of EmptyDir volume "workspace" exceeds the limit "64Mi".' }, 's1'), 'Failed', 'Evicted'],
  ])('%s', (_name, r, phase, reason) => {
    const o = sessionOutcome(r, 'ns', 10);
    expect(o).toMatchObject({ phase, session: 's1' });
    expect(o.reason).toBe(reason);
  });

  it.each([
    [result({ status: 'timeout', processLimit: true }), /allows a limited number of processes.*stopped at its timeout; the session keeps its state/],
    [result({ status: 'error', error, diskFull: 'tmp' }), /^\/tmp reached its size limit and the program could not write more/],
    [
      lostTo({ reason: 'OOMKilled', detail: 'x' }, 's1'),
      /^The session's interpreter used more memory than its limit and was killed\. The session is lost.*create a new session/,
    ],
    [
      lostTo({ reason: 'OOMKilled', detail: 'x', memory: { limit: '256Mi', tmpfs: ['/workspace', '/tmp'] } }, 's1'),
      /^The session's interpreter used more memory than its limit \(256Mi\) and was killed; files in \/tmp and \/workspace count as memory\. The session is lost/,
    ],
    [
      lostTo({ reason: 'Evicted', detail: 'Usage of EmptyDir volume "workspace" exceeds the limit "64Mi".' }, 's1'),
      /evicted.*"workspace" exceeds the limit "64Mi"/,
    ],
    [
      lostTo({ reason: 'DiskFull', detail: `${workspaceOverText('64Mi')}.` }, 's1'),
      /^The session's \/workspace on the node's disk went over its size limit \(64Mi, each file or directory counting at least 4 KiB, open deleted files included, a directory it could not read as full\), so the interpreter was stopped and the session's files deleted: .*The session is lost with its state: create a new session\. Write less data, or fewer and larger files/,
    ],
  ])('says what happened and what to do (%#)', (r, text) => {
    expect(sessionOutcome(r, 'ns', 10).message).toMatch(text);
  });

  // The tool names profiles with more memory than the pod's limit (execute_code's moreMemoryAdvice).
  it.each([
    ['read from the pod', lostTo({ reason: 'OOMKilled', detail: 'x', memory: { limit: '256Mi', tmpfs: ['/tmp'] } }, 's1'), '256Mi'],
    ['not known', lostTo({ reason: 'OOMKilled', detail: 'x' }, 's1'), undefined],
    ['not an OOM kill', lostTo({ reason: 'Evicted', detail: 'x', memory: { limit: '256Mi', tmpfs: ['/tmp'] } }, 's1'), undefined],
  ])("carries the interpreter's memory limit when %s", (_n, r, limit) => {
    expect(sessionOutcome(r, 'ns', 10).memoryLimit).toBe(limit);
  });

  // The memory charge and the pod's failure come from the pod the gateway reads, never from the
  // kernel: a result frame that claims an OOM kill and carries its own charge is parsed without
  // either, a kernel that says it is lost.
  it('takes no memory limit, directories or pod failure from a kernel that forges a lost result', () => {
    const forged = {
      id: 'c1',
      type: 'result',
      status: 'lost',
      ...NO_OUTPUT,
      error: { ename: 'OOMKilled', evalue: 'x', traceback: '' },
      memory: { limit: 'FORGED', tmpfs: ['/etc/FORGED'] },
      podFailure: 'OOMKilled',
    };
    const parsed = parseKernelFrame(forged);
    if (!parsed.ok) throw new Error(parsed.why);
    const r: SessionCallResult = { ...sanitizeResult(parsed.frame as ResultFrame, 50_000), session: 's1', capChars: 50_000 };
    expect(r).not.toHaveProperty('memory');
    expect(r).not.toHaveProperty('podFailure');
    const o = sessionOutcome(r, 'ns', 10);
    expect(o.memoryLimit).toBeUndefined();
    expect(o.reason, o.message).toBe('KernelLost');
  });

  // A Node kernel whose thread code held says so itself (runtime/node/watchdog.js): its word about
  // its own session, as diskFull always is; the size is not its to say.
  it('reads a lost result that says /workspace went over its limit as DiskFull, without a size', () => {
    const parsed = parseKernelFrame({
      id: 'c1',
      type: 'result',
      status: 'lost',
      ...NO_OUTPUT,
      error: { ename: 'DiskFull', evalue: '/workspace went over its limit (files)', traceback: '' },
      diskFull: 'workspace',
    });
    if (!parsed.ok) throw new Error(parsed.why);
    const r: SessionCallResult = { ...sanitizeResult(parsed.frame as ResultFrame, 50_000), session: 's1', capChars: 50_000 };
    const o = sessionOutcome(r, 'ns', 10);
    expect(o.reason, o.message).toBe('DiskFull');
    expect(o.message).toMatch(
      /^The session's \/workspace on the node's disk went over its size limit \(each file or directory counting at least 4 KiB, open deleted files included, a directory it could not read as full\).*The session is lost/,
    );
  });
});
