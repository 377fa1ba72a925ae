// Kubernetes Events on SandboxRuns (events.k8s.io/v1), so `kubectl describe sbr` tells the story.
// Recording is fire-and-forget: an Event must never slow down or fail a run.
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

export class EventRecorder {
  constructor(
    private readonly api: EventsV1Api,
    private readonly instance: string,
    private readonly log: Logger,
  ) {}

  record(target: EventTarget, type: 'Normal' | 'Warning', reason: string, action: string, note: string): void {
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
