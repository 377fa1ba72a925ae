// kernelLost.message quotes the sandbox (a kernel's error frame, the relay's stderr): what the
// gateway writes must pass the session schema (else the session vanishes from the gateway's
// cache) and carry no terminal control sequences into `kubectl describe`.
import { describe, expect, it, vi } from 'vitest';
import pino from 'pino';
import { SandboxSessionStatusSchema, type SandboxSession } from '../../../src/api/v1alpha1/index.js';
import { SessionActivity, keepAliveMs } from '../../../src/sessions/activity.js';
import type { SessionStore } from '../../../src/sessions/store.js';

const session = { metadata: { name: 's' } } as SandboxSession;

async function written(why: string): Promise<{ message: string; time: string }> {
  const applyStatus = vi.fn().mockResolvedValue(undefined);
  const activity = new SessionActivity({ applyStatus } as unknown as SessionStore, pino({ level: 'silent' }));
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
