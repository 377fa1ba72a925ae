// How long a transient run counts against its user's limits on the replica that admitted it: until
// the run has ended, also when its caller went away while the SandboxRun was being created. Until
// the informer shows the run (the create's answer, then the watch), the replica's own hold is all
// that counts it; a caller that cancelled each call during that moment and called again got every
// call admitted past CODEMODE_USER_MAX_RUNS (each run then went on, holding a run slot and a pod).
import { describe, expect, it } from 'vitest';
import { UserLimits } from '../../../src/limits/user-limits.js';
import { AdmissionError } from '../../../src/limits/admission.js';
import { KubeRunService } from '../../../src/runs/kube-run-service.js';
import type { RunExecutor } from '../../../src/runs/executor.js';
import type { KubeClients } from '../../../src/kube/clients.js';
import type { RunOutcome } from '../../../src/runs/types.js';
import { outcome } from '../gateway/harness.js';

const OWNER = { user: 'alice' };

function service(createMs: number) {
  const ended: Array<() => void> = [];
  const clients = {
    custom: {
      // The API server answers after createMs; the informer (runs() below) never shows the run.
      createNamespacedCustomObject: ({ body }: { body: unknown }) => new Promise((resolve) => setTimeout(() => resolve(body), createMs)),
    },
  } as unknown as KubeClients;
  const executor = {
    creating: () => () => undefined,
    executeWhileCreating: async (_body: unknown, creation: Promise<unknown>) => {
      await creation;
      await new Promise<void>((resolve) => ended.push(resolve));
      return outcome();
    },
  } as unknown as RunExecutor;
  const limits = new UserLimits({ caps: { runs: 1, sessions: 0, executionsPerMinute: 0 }, namespace: 'ns', runs: () => [], sessions: () => [] });
  const runs = new KubeRunService(
    clients,
    executor,
    { namespace: 'ns', defaultTimeoutSeconds: 30, maxTimeoutSeconds: 600, maxCodeBytes: 1000, maxCpu: '2', maxMemory: '2Gi', identity: 'replica-a' },
    undefined,
    undefined,
    { limits },
  );
  const execute = (signal?: AbortSignal): Promise<RunOutcome> => runs.execute({ code: 'print(1)', owner: OWNER }, signal ? { signal } : {});
  return { execute, endRuns: () => ended.splice(0).forEach((end) => end()) };
}

/** 'refused' for the per-user limit's refusal, 'admitted' for a call still running after 200 ms. */
async function admission(call: Promise<RunOutcome>): Promise<string> {
  call.catch(() => undefined);
  const settled = call.then(
    () => 'ran',
    (err: unknown) => (err instanceof AdmissionError ? 'refused' : String(err)),
  );
  return Promise.race([settled, new Promise<string>((r) => setTimeout(() => r('admitted'), 200))]);
}

describe('a transient run holds its user limit until it ends', () => {
  it.each([
    ['its caller waits', undefined],
    ['its caller goes away after the SandboxRun was created', 80],
    ['its caller goes away while the SandboxRun is being created', 10],
  ])('%s', async (_name, abortAfterMs) => {
    const s = service(50);
    const abort = new AbortController();
    const first = s.execute(abortAfterMs === undefined ? undefined : abort.signal).catch((err: unknown) => err);
    if (abortAfterMs !== undefined) {
      await new Promise((r) => setTimeout(r, abortAfterMs));
      abort.abort(new Error('client gone'));
      await first;
    }
    // The first run goes on (its create lands, its code runs): a second call of its user is refused.
    expect(await admission(s.execute())).toBe('refused');
    await new Promise((r) => setTimeout(r, 100));
    expect(await admission(s.execute())).toBe('refused');
    s.endRuns();
    await first;
    await new Promise((r) => setTimeout(r, 10));
    const third = s.execute();
    await new Promise((r) => setTimeout(r, 100));
    s.endRuns();
    await expect(third).resolves.toMatchObject({ phase: 'Succeeded' });
  });
});
