// Clean-up after a fault test, whatever state the test left: after a failure a replica may be
// killed and never restarted, and the mix still calling it, so a step can throw or hang until its
// client's timeout. Each step runs on its own and bounded, so the last one (deleting the test's
// namespace, with its pods) always runs; a namespace left behind takes node capacity from the
// tests that follow.
const STEP_MS = 30_000;

export async function tearDown(steps: ReadonlyArray<() => unknown>, eachMs = STEP_MS): Promise<void> {
  for (const step of steps) {
    let timer: NodeJS.Timeout | undefined;
    const bounded = new Promise<void>((resolve) => (timer = setTimeout(resolve, eachMs)));
    await Promise.race([Promise.resolve().then(step), bounded]).catch(() => undefined);
    clearTimeout(timer);
  }
}
