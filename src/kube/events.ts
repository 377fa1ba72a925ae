// Kubernetes Events on SandboxRuns (events.k8s.io/v1), so `kubectl describe sbr` tells the story.
// Recording is fire-and-forget: an Event must never slow down or fail a run. Events of one object
// and reason are rate-limited, as client-go's EventSourceObjectSpamFilter does: what code does can
// trigger them (a refused tool call in every call of a long session), and each is a write to etcd.
import { randomBytes } from 'node:crypto';
import { V1MicroTime } from '@kubernetes/client-node/dist/types.js';
import type { EventsV1Api } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { API_VERSION, SANDBOXRUN_KIND } from '../api/v1alpha1/index.js';
import { cutUtf8 } from '../util/text.js';

export interface EventTarget {
  name: string;
  namespace: string;
  uid?: string;
  apiVersion?: string;
  kind?: string;
}

/**
 * Events of one object and reason: a burst of EVENT_BURST, then one per EVENT_REFILL_MS — client-go's
 * spam filter's numbers (burst 25, one per 5 minutes). Far above an object's own story (a run has a
 * handful of Events, each reason about once), so only a repeating one is held back: a session
 * whose every call makes a refused tool call gets 25 ToolCallDenied Events, then one each 5 minutes.
 * Per reason, so a flood of one kind never hides another (the outcome of a run).
 */
export const EVENT_BURST = 25;
export const EVENT_REFILL_MS = 5 * 60_000;
/**
 * Objects-and-reasons whose budgets are kept; past it the least recently used is forgotten (it
 * starts again with a full burst). A few hundred bytes each (the key names the object): ~2 MB at
 * most, whatever users create.
 */
export const MAX_EVENT_KEYS = 4096;

/** Token buckets per key, the least recently used first (a Map keeps insertion order). */
export class EventBudgets {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Takes one Event of `key` if its budget allows. */
  take(key: string): boolean {
    const t = this.now();
    const held = this.buckets.get(key);
    const tokens = held ? Math.min(EVENT_BURST, held.tokens + Math.max(0, t - held.at) / EVENT_REFILL_MS) : EVENT_BURST;
    this.buckets.delete(key);
    const ok = tokens >= 1;
    this.buckets.set(key, { tokens: ok ? tokens - 1 : tokens, at: t });
    for (const old of this.buckets.keys()) {
      if (this.buckets.size <= MAX_EVENT_KEYS) break;
      this.buckets.delete(old);
    }
    return ok;
  }

  get size(): number {
    return this.buckets.size;
  }
}

export class EventRecorder {
  private readonly budgets: EventBudgets;

  constructor(
    private readonly api: EventsV1Api,
    private readonly instance: string,
    private readonly log: Logger,
    now: () => number = Date.now,
  ) {
    this.budgets = new EventBudgets(now);
  }

  record(target: EventTarget, type: 'Normal' | 'Warning', reason: string, action: string, note: string): void {
    const regarding = `${target.apiVersion ?? API_VERSION}/${target.kind ?? SANDBOXRUN_KIND}/${target.namespace}/${target.name}/${target.uid ?? ''}`;
    if (!this.budgets.take(`${regarding}\u0000${reason}`)) {
      this.log.debug(
        { reason, kind: target.kind ?? SANDBOXRUN_KIND, name: target.name },
        'Dropped an Event: this object had more of this reason than the rate allows',
      );
      return;
    }
    const body = {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name: `${target.name}.${randomBytes(6).toString('hex')}`, namespace: target.namespace },
      eventTime: new V1MicroTime(),
      reportingController: 'codemode.dev/operator',
      reportingInstance: this.instance.slice(0, 128),
      action,
      reason,
      type,
      // The API server takes 1024 bytes of note (UTF-8), not characters: a longer one is refused.
      note: cutUtf8(note, 1024),
      regarding: {
        apiVersion: target.apiVersion ?? API_VERSION,
        kind: target.kind ?? SANDBOXRUN_KIND,
        name: target.name,
        namespace: target.namespace,
        uid: target.uid,
      },
    };
    this.api.createNamespacedEvent({ namespace: target.namespace, body }).catch((err: unknown) => {
      this.log.debug({ err: String(err), reason }, 'Failed to record Event');
    });
  }
}
