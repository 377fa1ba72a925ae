// kernelLost.message quotes the sandbox (a kernel's error frame, the relay's stderr): what the
// gateway writes must pass the session schema (else the session vanishes from the gateway's
// cache) and carry no terminal control sequences into `kubectl describe`.
import { describe, expect, it, vi } from 'vitest';
import pino from 'pino';
import { SandboxSessionStatusSchema, type SandboxSession } from '../../../src/api/v1alpha1/index.js';
import { SessionActivity, keepAliveMs } from '../../../src/sessions/activity.js';
import type { SessionStore } from '../../../src/sessions/store.js';

const session = { metadata: { name: 's', uid: 'uid-1', resourceVersion: '7' }, spec: { idleTimeoutSeconds: 600 } } as SandboxSession;
/** The same name, made again: another session. */
const again = { metadata: { name: 's', uid: 'uid-2', resourceVersion: '9' }, spec: { idleTimeoutSeconds: 600 } } as SandboxSession;
const quiet = pino({ level: 'silent' });
const conflict = Object.assign(new Error('conflict'), { code: 409 });

async function written(why: string): Promise<{ message: string; time: string }> {
  const applyStatus = vi.fn().mockResolvedValue(undefined);
  const activity = new SessionActivity({ applyStatus, get: () => session } as unknown as SessionStore, quiet);
  await activity.markLost(session, why);
  expect(applyStatus).toHaveBeenCalledTimes(1);
  return (applyStatus.mock.calls[0]?.[2] as { kernelLost: { message: string; time: string } }).kernelLost;
}

describe('SessionActivity.markLost', () => {
  it.each<[string, string, (m: string) => void]>([
    [
      'astral text past the bound (code points ≠ code units)',
      `the kernel rejected the stream: ${'😀'.repeat(900)}`,
      (m) => expect(m.length).toBeLessThanOrEqual(1024),
    ],
    ['an ASCII text past the bound', 'x'.repeat(5000), (m) => expect(m).toMatch(/^x{999}…$/)],
    ['a cut that would split a surrogate pair', `${'a'.repeat(998)}😀😀`, (m) => expect(m).toBe(`${'a'.repeat(998)}…`)],
    [
      'terminal escapes and line breaks',
      'exec stream closed: \u001b[2J\u001b]0;pwned\u0007\r\nroot#',
      (m) => expect(m).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/),
    ],
    ['a short plain text, unchanged', 'the exec stream closed', (m) => expect(m).toBe('the exec stream closed')],
  ])('%s', async (_n, why, check) => {
    const kernelLost = await written(why);
    check(kernelLost.message);
    expect(SandboxSessionStatusSchema.safeParse({ kernelLost }).success).toBe(true);
  });
});

// The gateway writes by name; a session deleted and made again under its name (kubectl, another
// replica) within a moment is another session, with another interpreter. The status subresource
// ignores a uid in the applied object, so the write is guarded by the resourceVersion of the copy
// whose uid is the call's.
describe('writes only on the session the call was in', () => {
  it('markLost: nothing when the cache holds a session made again under the name', async () => {
    const applyStatus = vi.fn().mockResolvedValue(undefined);
    await new SessionActivity({ applyStatus, get: () => again } as unknown as SessionStore, quiet).markLost(session, 'gone');
    expect(applyStatus).not.toHaveBeenCalled();
  });

  it("markLost: on the cached copy's resourceVersion, again on a newer copy after a conflict, never on another session", async () => {
    const copies = [session, { ...session, metadata: { ...session.metadata, resourceVersion: '8' } }, again];
    let read = 0;
    const applyStatus = vi.fn().mockRejectedValueOnce(conflict).mockRejectedValueOnce(conflict).mockResolvedValue(undefined);
    const get = (): SandboxSession | undefined => copies[Math.min(read++, copies.length - 1)];
    await new SessionActivity({ applyStatus, get } as unknown as SessionStore, quiet).markLost(session, 'gone');
    // Two tries on the session's own copies; the third read found the other session and stopped.
    expect(applyStatus.mock.calls.map((c) => c[3])).toEqual(['7', '8']);
  });

  it('note: calls noted for a session are not added to one made again under its name', async () => {
    const applyStatus = vi.fn().mockResolvedValue(undefined);
    const activity = new SessionActivity({ applyStatus, get: () => again } as unknown as SessionStore, quiet);
    activity.note(session, 3);
    await new Promise((r) => setTimeout(r, 50));
    expect(applyStatus).not.toHaveBeenCalled();
    // The new session's own calls are written, without the old ones.
    await new Promise((r) => setTimeout(r, 1100));
    activity.note(again, 1);
    await vi.waitFor(() => expect(applyStatus).toHaveBeenCalledTimes(1), { timeout: 2000 });
    expect(applyStatus.mock.calls[0]?.[2]).toMatchObject({ runCount: 1 });
    expect(applyStatus.mock.calls[0]?.[3]).toBe('9');
  });
});

// A failed write is tried again an interval later: with calls to add, and without (a file
// operation or the keep-alive), since idle collection reads only what was written.
describe('note: activity a write failed to record', () => {
  it.each([
    ['a call', 1, { runCount: 1 }],
    ['a file operation (no call)', 0, { runCount: 0 }],
  ])('%s is written again after a 500', async (_n, calls, status) => {
    const failed = Object.assign(new Error('etcdserver: request timed out'), { code: 500 });
    const applyStatus = vi.fn().mockRejectedValueOnce(failed).mockResolvedValue(undefined);
    const activity = new SessionActivity({ applyStatus, get: () => session } as unknown as SessionStore, quiet);
    activity.note(session, calls);
    await vi.waitFor(() => expect(applyStatus).toHaveBeenCalledTimes(2), { timeout: 3000 });
    expect(applyStatus.mock.calls[1]?.[2]).toMatchObject(status);
  });
});

describe('keepAliveMs: how often a call in progress renews its session', () => {
  it.each([
    [10, 2500],
    [2, 1000],
    [600, 60_000],
    [86400, 60_000],
  ])('idle timeout %i s: every %i ms', (idle, ms) => {
    expect(keepAliveMs(idle)).toBe(ms);
    // Well within the timeout, so that a write the API server answers late still lands in time.
    expect(ms).toBeLessThanOrEqual(Math.max(1000, (idle * 1000) / 4));
  });
});
