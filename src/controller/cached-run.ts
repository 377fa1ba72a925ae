// What the SandboxRun informer keeps of each run: only what reconcile reads (phase, times, the
// executor annotation, timeouts). Code, stdin and outputs can make a run ~1 MiB; a namespace of
// finished runs cached whole put the gateway into an out-of-memory loop. The code of a run that
// is still to be executed is read with one GET (or comes back from the claim) when it executes.
// An audit record's calls keep their names and starts only (the per-user rate limit's count).
import type { KubernetesObject } from '@kubernetes/client-node';
import type { z } from 'zod';
import { ObjectMetaSchema, SandboxRunSchema, SandboxRunSpecSchema, SandboxRunStatusSchema, describeIssues } from '../api/v1alpha1/index.js';

/** Set on a cached object, so nothing mistakes it for a whole run. */
export const STRIPPED_ANNOTATION = 'codemode.dev/cache-stripped';
/** kubectl apply copies the whole object (code included) into this annotation. */
const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';
const SPEC_DROPPED = ['code', 'stdin'] as const;
const STATUS_DROPPED = ['stdout', 'stderr', 'message', 'conditions'] as const;

type Obj = Record<string, unknown>;

function without(o: unknown, keys: readonly string[]): Obj | undefined {
  if (typeof o !== 'object' || o === null || Array.isArray(o)) return undefined;
  const out: Obj = { ...(o as Obj) };
  for (const k of keys) delete out[k];
  return out;
}

/** The cached form of a run (pure; the input is not changed). */
export function stripRun<T extends KubernetesObject>(obj: T): T {
  const o = obj as unknown as Obj;
  const meta = without(o.metadata, ['managedFields']) ?? {};
  const annotations = without(meta.annotations, [LAST_APPLIED]) ?? {};
  annotations[STRIPPED_ANNOTATION] = 'true';
  const out: Obj = { ...o, metadata: { ...meta, annotations } };
  const spec = without(o.spec, SPEC_DROPPED);
  if (spec) out.spec = spec;
  const status = without(o.status, STATUS_DROPPED);
  if (status) {
    // An audit record's calls: what the per-user rate limit counts (limits/user-limits.ts).
    if (Array.isArray(status.calls)) status.calls = status.calls.map((c: Obj | null) => ({ name: c?.name, startTime: c?.startTime }));
    out.status = status;
  }
  return out as unknown as T;
}

/** Only the fields a cached run keeps, validated as strictly as in a whole run. */
export const CachedRunSchema = SandboxRunSchema.extend({
  metadata: ObjectMetaSchema,
  spec: SandboxRunSpecSchema.omit({ code: true, stdin: true }),
  // calls: read from the cache by the per-user limits only, never by reconcile.
  status: SandboxRunStatusSchema.omit({ stdout: true, stderr: true, message: true, conditions: true, calls: true }).optional(),
});
export type CachedRun = z.infer<typeof CachedRunSchema>;

export function parseCachedRun(obj: unknown): { ok: true; run: CachedRun } | { ok: false; message: string } {
  const r = CachedRunSchema.safeParse(obj, { reportInput: true });
  if (r.success) return { ok: true, run: r.data };
  return { ok: false, message: `Invalid SandboxRun: ${describeIssues(r.error.issues)}.` };
}
