// A transient run that starts before its SandboxRun exists (issue 13: the create, ~8–12 ms, off
// the warm path). The gateway creates the run and, when this process holds a reserved pool pod,
// sends the code to that pod's kernel at the same time (executor.ts executeCreating). What the
// code could make visible waits for the create: its streamed output (held here), its nested tool
// calls and its result. A refused create deletes the pod: the code ran, if at all, in a single-use
// pod without network, and nothing of it left the pod.
//
// Exactly-once: the run carries this process's identity from its creation, so no other process
// ever starts it; this process knows it by name until it has a uid; and a create whose fate cannot
// be told is remembered, so the run, should it exist, is failed rather than executed.
import type { EventEmitter } from 'node:events';
import type { V1OwnerReference } from '@kubernetes/client-node';
import { ANNOTATION_EXECUTOR, API_VERSION, LABEL_RUN, LABEL_RUNTIME, SANDBOXRUN_KIND, normalizeLanguage, type SandboxRun } from '../api/v1alpha1/index.js';
import { statusOf } from '../kube/clients.js';
import { runLabelValue } from '../sandbox/names.js';
import type { OutputChunk } from './types.js';

/** Streamed output held back until the run exists: beyond this, chunks are dropped (the result keeps the output). */
export const MAX_HELD_OUTPUT_CHARS = 1 << 20;

/** A run in a pool pod: the pool (to reserve the next pod) and, for a reserved pod, the patch making it the run's. */
export interface Adoption {
  adopt?: () => Promise<void>;
  pool: { ensureReserved(): void };
}

/** A transient run whose code started in this process's reserved pod while its SandboxRun is being created. */
export interface EarlyStart {
  /** The run as created (or found after a lost answer); rejects when it does not exist. */
  creating: Promise<SandboxRun>;
  /** The reserved pod's adoption by the run, once the run exists. */
  adoption(run: SandboxRun): Adoption;
}

/** namespace/name: how a run is known before it has a uid. */
export function runKey(run: SandboxRun): string {
  return `${run.metadata.namespace ?? ''}/${run.metadata.name}`;
}

/** What a claim or an adoption writes on a pool pod for `run`: the run as owner, its labels, its deadline. */
export function claimOf(
  run: SandboxRun,
  opts: { podStartupTimeoutSeconds: number },
): { owner: V1OwnerReference; labels: Record<string, string>; deadline: number } {
  return {
    owner: { apiVersion: API_VERSION, kind: SANDBOXRUN_KIND, name: run.metadata.name, uid: run.metadata.uid ?? '', controller: true, blockOwnerDeletion: true },
    labels: { [LABEL_RUN]: runLabelValue(run.metadata.name), [LABEL_RUNTIME]: normalizeLanguage(run.spec.language) },
    deadline: opts.podStartupTimeoutSeconds + run.spec.timeoutSeconds + 60,
  };
}

/**
 * The output listener of an execution: chunks go to its subscribers; for an early start only once
 * the run exists (held until then, at most MAX_HELD_OUTPUT_CHARS; dropped if the create fails).
 */
export function visibleOutput(output: EventEmitter, early: Pick<EarlyStart, 'creating'> | undefined): (stream: 'stdout' | 'stderr', text: string) => void {
  const emit = (chunk: OutputChunk): void => void output.emit('chunk', chunk);
  if (!early) return (stream, text) => emit({ stream, text });
  let held: OutputChunk[] | undefined = [];
  let heldChars = 0;
  let refused = false;
  early.creating.then(
    () => {
      const chunks = held ?? [];
      held = undefined;
      for (const chunk of chunks) emit(chunk);
    },
    () => {
      refused = true;
      held = [];
    },
  );
  return (stream, text) => {
    if (held === undefined) return emit({ stream, text });
    if (refused || heldChars + text.length > MAX_HELD_OUTPUT_CHARS) return;
    heldChars += text.length;
    held.push({ stream, text });
  };
}

/** Attempts to read an early-started run whose create failed with no clear answer, and the pause before each retry. */
const CONFIRM_TRIES = 3;
const CONFIRM_PAUSE_MS = 500;

/**
 * Whether a create that failed wrote the run after all: the run (found, carrying the draft's
 * executor and code), 'absent' (refused by the API server, or not there), or 'unknown' (the API
 * could not be read). A 4xx other than 408/429 is a refusal: nothing was written.
 */
export async function confirmCreate(
  draft: SandboxRun,
  err: unknown,
  read: (namespace: string, name: string) => Promise<SandboxRun | undefined>,
  defaultNamespace: string,
  pause: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
): Promise<SandboxRun | 'absent' | 'unknown'> {
  const status = statusOf(err);
  if (status !== undefined && status >= 400 && status < 500 && status !== 408 && status !== 429) return 'absent';
  for (let attempt = 1; attempt <= CONFIRM_TRIES; attempt++) {
    let found: SandboxRun | undefined;
    try {
      found = await read(draft.metadata.namespace ?? defaultNamespace, draft.metadata.name);
    } catch {
      if (attempt < CONFIRM_TRIES) await pause(CONFIRM_PAUSE_MS * attempt);
      continue;
    }
    if (found === undefined) return 'absent';
    const ours = found.metadata.annotations?.[ANNOTATION_EXECUTOR] === draft.metadata.annotations?.[ANNOTATION_EXECUTOR] && found.spec.code === draft.spec.code;
    return ours ? found : 'absent';
  }
  return 'unknown';
}
