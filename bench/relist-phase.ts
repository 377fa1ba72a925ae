// When a pod-starting call begins, relative to the kubelet's clock. The kubelet notices a started
// container at its next relist of the runtime (generic PLEG, every second), so how long a pod takes
// to be Running depends on where in that second its container started. A loop that starts its next
// call as soon as the last one ended is phase-locked to that clock (each call ends a fixed time
// after a relist): its samples all see about the same wait, and work the loop does outside its
// timing (the floor's awaited delete, the operator's after-reply writes) or before its pod's
// container starts changes the wait instead of adding to the time. Measured 2026-11-29: a 500 ms
// pause before each cold call moved its median from 1,053 to 1,522 ms, all 20 calls alike.
//
// So the floor and the cold row start each call at the same offsets after the relist that made
// their previous pod Ready (seen by their watch), offsets spread evenly over one relist period in
// a low-discrepancy order (the golden-ratio sequence): both rows see every phase alike, as callers
// arriving at random times do, and differ only by their own work.

/** The kubelet's relist period (pleg.relistPeriod; the test cluster does not change it). */
export const KUBELET_RELIST_MS = 1000;

const GOLDEN = (Math.sqrt(5) - 1) / 2;

/** The phase of call `i` (0-based, warm-ups included): in [0, periodMs), evenly spread over consecutive calls. */
export function relistOffsetMs(i: number, periodMs = KUBELET_RELIST_MS): number {
  return ((i * GOLDEN) % 1) * periodMs;
}

/**
 * Pure: how long to wait, `sinceAnchorMs` after a relist was seen (a pod's Ready), until the next
 * moment `offsetMs` into a relist period.
 */
export function relistWaitMs(sinceAnchorMs: number, offsetMs: number, periodMs = KUBELET_RELIST_MS): number {
  return (((offsetMs - sinceAnchorMs) % periodMs) + periodMs) % periodMs;
}

/** Waits until call `i`'s phase after `anchorMs` (performance.now() of the last Ready seen; none: `offset` from now). */
export async function untilRelistPhase(anchorMs: number | undefined, i: number): Promise<void> {
  const offset = relistOffsetMs(i);
  const wait = anchorMs === undefined ? offset : relistWaitMs(performance.now() - anchorMs, offset);
  await new Promise((r) => setTimeout(r, wait));
}
