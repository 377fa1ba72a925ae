// Opening a stream into a sandbox pod again while the API server or the kubelet cannot be reached or
// refuses the exec for a while (a restart, an outage): nothing of the code has been sent before a
// stream opened, so trying again cannot run it twice. Shared by runs (src/runs/in-pod.ts) and
// session calls (src/sessions/kernel-call.ts).
import pRetry from 'p-retry';

/** Only an attempt that failed this fast is tried again: a kernel that did not answer for seconds is hung, not refused. */
const FAST_FAILURE_MS = 5_000;
/** The pause after the first failure; each later one doubles it, up to 4 times it. */
const FIRST_DELAY_MS = 1_000;

export interface OpenWait {
  /** How long to go on trying, from the first attempt. */
  maxMs: number;
  /** Whether the failure is one worth waiting out (asked only for attempts that failed fast). */
  retryable: (err: unknown) => boolean;
}

/**
 * `open`, tried again 1–4 s apart while it fails fast in a way `retryable` accepts, for at most
 * `maxMs`. The first attempt is made directly: an open stream (most calls) costs no retry machinery.
 */
export async function untilOpened<T>(open: () => Promise<T>, o: OpenWait): Promise<T> {
  const first = performance.now();
  let started = first;
  const failedFast = (): boolean => performance.now() - started < FAST_FAILURE_MS;
  try {
    return await open();
  } catch (err) {
    if (!(o.maxMs > 0 && failedFast() && o.retryable(err))) throw err;
  }
  await new Promise((r) => setTimeout(r, Math.min(FIRST_DELAY_MS, o.maxMs - (performance.now() - first))));
  const attempt = (): Promise<T> => {
    started = performance.now();
    return open();
  };
  return pRetry(attempt, {
    retries: Number.POSITIVE_INFINITY,
    maxRetryTime: Math.max(0, o.maxMs - (performance.now() - first)),
    minTimeout: 2 * FIRST_DELAY_MS,
    maxTimeout: 4 * FIRST_DELAY_MS,
    factor: 2,
    shouldRetry: ({ error }) => failedFast() && o.retryable(error),
  });
}
