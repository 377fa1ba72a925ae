// Opening a stream into a sandbox pod again while the API server or the kubelet cannot be reached or
// refuses the exec for a while (a restart, an outage): nothing of the code has been sent before a
// stream opened, so trying again cannot run it twice. Shared by runs (src/runs/in-pod.ts) and
// session calls (src/sessions/service.ts).
import pRetry from 'p-retry';

/** Only an attempt that failed this fast is tried again: a kernel that did not answer for seconds is hung, not refused. */
const FAST_FAILURE_MS = 5_000;

export interface OpenWait {
  /** How long to go on trying, from the first attempt. */
  maxMs: number;
  /** Whether the failure is one worth waiting out (asked only for attempts that failed fast). */
  retryable: (err: unknown) => boolean;
}

/** `open`, tried again 1–4 s apart while it fails fast in a way `retryable` accepts, for at most `maxMs`. */
export function untilOpened<T>(open: () => Promise<T>, o: OpenWait): Promise<T> {
  let started = 0;
  const attempt = (): Promise<T> => {
    started = performance.now();
    return open();
  };
  if (o.maxMs <= 0) return attempt();
  return pRetry(attempt, {
    retries: Number.POSITIVE_INFINITY,
    maxRetryTime: o.maxMs,
    minTimeout: 1_000,
    maxTimeout: 4_000,
    factor: 2,
    shouldRetry: ({ error }) => performance.now() - started < FAST_FAILURE_MS && o.retryable(error),
  });
}
