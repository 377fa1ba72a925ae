// An UpstreamServer's status as a pure function of what the gateway observes. Written only when it
// differs from the stored one (no write per ping), by the leader replica only.
import {
  MAX_MESSAGE_LENGTH,
  MAX_UPSTREAM_ERROR_LENGTH,
  setCondition,
  UpstreamReasons,
  type UpstreamReason,
  type UpstreamServerStatus,
} from '../api/v1alpha1/index.js';
import { cutUnits } from '../util/text.js';

/** What the gateway knows of one upstream right now. */
export type Observation =
  /** The spec does not parse; the message says which field and what to write instead. */
  | { kind: 'invalid'; message: string }
  /** A Secret or key the spec names is missing or unreadable. */
  | { kind: 'secret-missing'; message: string }
  /** The Secrets are still being read: nothing connected yet. */
  | { kind: 'waiting' }
  /** spec.stdio: the server's Deployment is not available yet (ServerStarting) or cannot run (ServerFailing). */
  | { kind: 'stdio'; reason: UpstreamReason; message: string }
  /** A connection exists (ready or not). */
  | { kind: 'connection'; ready: boolean; reason: UpstreamReason; error?: string; toolCount: number; refreshedAt?: Date };

const READY = 'Ready';

function condition(o: Observation): { status: 'True' | 'False'; reason: UpstreamReason; message: string } {
  switch (o.kind) {
    case 'invalid':
      return { status: 'False', reason: UpstreamReasons.InvalidSpec, message: o.message };
    case 'secret-missing':
      return { status: 'False', reason: UpstreamReasons.SecretNotFound, message: o.message };
    case 'waiting':
      return { status: 'False', reason: UpstreamReasons.Connecting, message: 'Reading the Secrets the spec names.' };
    case 'stdio':
      return { status: 'False', reason: o.reason, message: o.message };
    case 'connection':
      if (o.ready) return { status: 'True', reason: o.reason, message: `Connected; ${o.toolCount} tools offered.` };
      if (o.reason === UpstreamReasons.Connecting) return { status: 'False', reason: o.reason, message: 'Connecting to the upstream.' };
      return { status: 'False', reason: o.reason, message: o.error ?? 'The upstream is not reachable; the gateway reconnects with backoff.' };
  }
}

/**
 * The status to store. `lastError` keeps the last failure even after recovery (the Ready
 * condition says what holds now); `lastRefreshTime` and `toolCount` move only on a successful
 * listing, so a status computed twice from the same observation is the same.
 */
export function computeStatus(prev: UpstreamServerStatus | undefined, generation: number | undefined, o: Observation, now: Date): UpstreamServerStatus {
  const c = condition(o);
  c.message = cutUnits(c.message, MAX_MESSAGE_LENGTH);
  const conditions = setCondition(prev?.conditions, { type: READY, ...c, ...(generation !== undefined && { observedGeneration: generation }) }, now);
  const error =
    o.kind === 'connection'
      ? o.ready
        ? undefined
        : o.error
      : o.kind === 'waiting' || (o.kind === 'stdio' && o.reason !== UpstreamReasons.ServerFailing)
        ? undefined
        : o.message;
  const lastError = error !== undefined ? cutUnits(error, MAX_UPSTREAM_ERROR_LENGTH) : prev?.lastError;
  const refreshed = o.kind === 'connection' && o.refreshedAt ? o.refreshedAt.toISOString().replace(/\.\d{3}Z$/, 'Z') : prev?.lastRefreshTime;
  const toolCount = o.kind === 'connection' && o.ready ? o.toolCount : 0;
  return {
    ...(generation !== undefined && { observedGeneration: generation }),
    conditions,
    toolCount,
    ...(lastError !== undefined && { lastError }),
    ...(refreshed !== undefined && { lastRefreshTime: refreshed }),
  };
}

/** Same content (conditions compared without lastTransitionTime, which setCondition keeps anyway). */
export function sameStatus(a: UpstreamServerStatus | undefined, b: UpstreamServerStatus): boolean {
  const norm = (s: UpstreamServerStatus | undefined): string =>
    JSON.stringify({
      g: s?.observedGeneration,
      c: (s?.conditions ?? []).map((x) => [x.type, x.status, x.reason, x.message, x.observedGeneration]),
      t: s?.toolCount,
      e: s?.lastError,
      r: s?.lastRefreshTime,
    });
  return norm(a) === norm(b);
}
