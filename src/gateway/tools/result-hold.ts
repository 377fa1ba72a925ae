// What an execute_code result holds of its caller's share of the body budget (body-budget.ts) until
// it has been sent. A run's slot is freed when the run ends, not when its result has been read, so
// results pile up for a client that reads them slowly (never cut: stall-guard.ts) or sends many calls
// at once: counted only after the fact (`add`), the calls one user had running and queued (16 + 32
// on a replica by default) could all finish into the replica at once with 7 MiB of images each,
// several times the user's share, and each is serialised again as it is sent. So a result's images
// are taken from the share (`take`) before its reply is made: one the share has no room for is left
// out, with a note saying why, and not kept. Its texts are bounded by the output caps and always
// sent; they count whatever the budget.
import type { DisplayItem } from '../../exec/display.js';
import type { RunOutcome } from '../../runs/types.js';
import type { BodyBudgetLimit, BodyBudgetLimits, BodyHold } from '../body-budget.js';

/** Characters of a result's texts as sent: twice (the text and structuredContent) its streams and value, and its display texts. */
export function textBytes(outcome: RunOutcome): number {
  const texts = outcome.stdout.length + outcome.stderr.length + (outcome.result?.length ?? 0);
  return 2 * texts + (outcome.display ?? []).reduce((n, d) => n + (d.kind === 'text' ? d.text.length : 0), 0);
}

/** About what a result holds until sent: its texts and its images (base64). */
export function replyBytes(outcome: RunOutcome): number {
  return textBytes(outcome) + (outcome.display ?? []).reduce((n, d) => n + (d.kind === 'image' ? d.data.length : 0), 0);
}

const MiB = 1024 * 1024;

function leftOut(bytes: number, full: BodyBudgetLimit, limits: BodyBudgetLimits): DisplayItem {
  const why =
    full === 'user'
      ? `your results and requests still in flight on this gateway replica hold ${Math.round(limits.perUserBytes / MiB)} MiB, the most one user may. Read earlier results before sending more calls that display images, or display fewer at once`
      : `this gateway replica is holding ${Math.round(limits.totalBytes / MiB)} MiB of results and requests for its callers, its limit`;
  return { kind: 'text', format: 'note', text: `An image of ${bytes} bytes was not returned: ${why}. Run the code again to display it.` };
}

/**
 * `outcome` as it may be sent under `hold`: its texts counted, each image taken from the hold or,
 * when there is no room for it, replaced by a note. Without a hold (no HTTP request) unchanged.
 */
export function holdResult(outcome: RunOutcome, hold: BodyHold | undefined): RunOutcome {
  if (!hold) return outcome;
  hold.add(textBytes(outcome));
  if (!outcome.display?.some((d) => d.kind === 'image')) return outcome;
  const display = outcome.display.map((d): DisplayItem => {
    if (d.kind !== 'image') return d;
    const full = hold.take(d.data.length);
    return full ? leftOut(d.bytes, full, hold.limits) : d;
  });
  return { ...outcome, display };
}
