// A run in a session sends its code to the session's kernel only once its Running status (the
// marker that the code may have started, run-decision.ts) is stored: without it a restart could not
// tell the code may have run. A recording fake of the client stands in for the API server.
import { EventEmitter } from 'node:events';
import { pino, type Logger } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { Reasons, type SandboxRun } from '../../../src/api/v1alpha1/index.js';
import type { KubeClients } from '../../../src/kube/clients.js';
import type { EventRecorder } from '../../../src/kube/events.js';
import { RunRecorder } from '../../../src/runs/record.js';
import { SessionRuns, notStarted } from '../../../src/runs/session-run.js';
import { failedStatus } from '../../../src/runs/status.js';
import type { SessionService } from '../../../src/sessions/service.js';

const run: SandboxRun = {
  apiVersion: 'codemode.dev/v1alpha1',
  kind: 'SandboxRun',
  metadata: { name: 'r', namespace: 'ns', uid: 'u1', generation: 1, creationTimestamp: '2026-11-22T09:59:00Z' },
  spec: { language: 'python', code: 'print(1)', timeoutSeconds: 30, session: 's1' },
};
const apiErr = (code: number): Error => Object.assign(new Error(`HTTP-Code: ${code}`), { code, body: JSON.stringify({ message: 'x' }) });

/** Every call the session service gets, by method name; it knows no session. */
function sessions(): { service: SessionService; calls: string[] } {
  const calls: string[] = [];
  const service = new Proxy({} as SessionService, {
    get: (_target, name) => (): Promise<undefined> => {
      calls.push(String(name));
      return Promise.resolve(undefined);
    },
  });
  return { service, calls };
}

describe('SessionRuns.run: the code goes to the session only once its marker is stored', () => {
  it.each<[string, unknown, string[], string]>([
    // [what, the marker write's error (undefined: it lands), the session calls made, the message]
    ['403 (RBAC): refused, the code is not sent', apiErr(403), [], notStarted('s1', 'refused')],
    [
      'a TypeError building the request: refused, not sent',
      new TypeError("Cannot read properties of undefined (reading 'name')"),
      [],
      notStarted('s1', 'refused'),
    ],
    ['404: the run was deleted, not sent', apiErr(404), [], notStarted('s1', 'gone')],
    // The control: with the marker stored, the session is asked (the fake knows no session).
    ['the marker lands: the session is asked', undefined, ['find'], 'There is no session "s1".'],
  ])('%s', async (_what, err, sessionCalls, message) => {
    const patches: unknown[] = [];
    const custom = {
      patchNamespacedCustomObjectStatus: (req: unknown): Promise<object> => {
        patches.push(req);
        // Every status write fails alike (a missing RBAC rule does not come back), the Failed one too.
        return err !== undefined ? Promise.reject(err) : Promise.resolve({});
      },
    };
    const events = { record: vi.fn() } as unknown as EventRecorder;
    const record = new RunRecorder({ clients: { custom } as unknown as KubeClients, events, namespace: 'ns', outputCapBytes: 65536 });
    // As the executor's: it writes the Failed status (which gives up here too), then answers.
    const finishEarly = vi.fn(async (r: SandboxRun, reason: Parameters<typeof failedStatus>[1], msg: string, log: Logger) => {
      const status = failedStatus(r, reason, msg, new Date());
      await record.patchStatus(r, status, log);
      return record.outcome(r, status);
    });
    const runs = new SessionRuns({ record, events, podStartupTimeoutSeconds: 60, finishEarly });
    const s = sessions();
    runs.setSessions(s.service);

    const outcome = await runs.run(run, 's1', new EventEmitter(), pino({ level: 'silent' }), performance.now());

    expect(s.calls).toEqual(sessionCalls);
    expect(outcome.phase).toBe('Failed');
    expect(outcome.message).toContain(message);
    if (sessionCalls.length === 0) expect(finishEarly).toHaveBeenCalledWith(run, Reasons.ExecFailed, message, expect.anything());
  });

  it.each([
    ['refused', /could not be written.*sandboxruns\/status.*gateway's log.*run the code again/],
    ['gone', /was deleted before its code was sent to session s1.*Create the run again/],
  ] as const)('says what happened and what to do (%s)', (marked, expected) => {
    const text = notStarted('s1', marked);
    expect(text).toMatch(/^The code was not started: /);
    expect(text).toMatch(expected);
  });
});
