// Where a long fault test is: each step it reaches is printed with the seconds since it began, so
// a test that runs out of time says which wait it was in (vitest prints a timed-out test's output).
export function phases(test: string): (what: string) => void {
  const start = Date.now();
  return (what) => console.log(`[${test} +${((Date.now() - start) / 1000).toFixed(1)}s] ${what}`);
}

/**
 * Waits for `signal` (e.g. "the code printed its first line"), which a call's progress gives.
 * Fails at once, with how the call ended, when `call` settles first (its code never got there:
 * a pod that did not start in time on a loaded node, say), and after `ms` at the latest: a wait on
 * a signal that cannot come no longer holds the test until its own timeout, saying nothing.
 */
export async function signalBefore(signal: Promise<void>, call: Promise<unknown>, what: string, ms = 120_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const ended = call.then(
    (r) => {
      throw new Error(`${what}: the call ended first, answered ${JSON.stringify(r).slice(0, 2000)}`);
    },
    (e: unknown) => {
      throw new Error(`${what}: the call ended first, threw ${e instanceof Error ? e.message : String(e)}`);
    },
  );
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms / 1000} s`)), ms)));
  try {
    await Promise.race([signal, ended, late]);
  } finally {
    clearTimeout(timer);
    ended.catch(() => undefined);
  }
}
