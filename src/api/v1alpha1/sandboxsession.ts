// SandboxSession: a sandbox pod that keeps an interpreter alive between calls, so an agent can
// load data in one call and use it in the next. Deleted when idle past idleTimeoutSeconds or
// older than maxLifetimeSeconds (the controller's garbage collection, pure time math).
import { z } from 'zod';
import { ConditionSchema } from './conditions.js';
import { OwnerSchema } from './owner.js';
import { PackageListSchema } from './packages.js';
import { API_VERSION, MAX_CONDITIONS, MAX_MESSAGE_LENGTH, MAX_REASON_LENGTH, ObjectMetaSchema, ProfileRefSchema, describeIssues } from './sandboxrun.js';

export const SANDBOXSESSION_KIND = 'SandboxSession';
export const SANDBOXSESSION_PLURAL = 'sandboxsessions';
export const MAX_IDLE_TIMEOUT_SECONDS_HARD = 86400;
export const MAX_LIFETIME_SECONDS_HARD = 604800;

/** Languages with a persistent kernel (runtime/). `javascript` is an alias of `node`. */
export const SessionLanguageSchema = z.enum(['python', 'bash', 'node', 'javascript']);
export type SessionLanguage = z.infer<typeof SessionLanguageSchema>;
export type KernelLanguage = 'python' | 'bash' | 'node';

export function kernelLanguage(l: SessionLanguage): KernelLanguage {
  return l === 'javascript' ? 'node' : l;
}

export const SessionPhaseSchema = z.enum(['Pending', 'Ready', 'Lost', 'Failed']);
export type SessionPhase = z.infer<typeof SessionPhaseSchema>;

/** A session's idle timeout when its creator leaves it out (the gateway writes the administrator's maximum when lower). */
export const DEFAULT_IDLE_TIMEOUT_SECONDS = 600;

export const SandboxSessionSpecSchema = z
  .object({
    owner: OwnerSchema.optional(),
    profile: ProfileRefSchema.optional().describe(
      "Name of a SandboxProfile in the same namespace: the kind of sandbox (image, resources, warm pool). Default: the administrator's default profile.",
    ),
    language: SessionLanguageSchema.default('python').describe('Language of the persistent interpreter: python, bash, node or javascript (an alias of node).'),
    idleTimeoutSeconds: z
      .int()
      .min(10)
      .max(MAX_IDLE_TIMEOUT_SECONDS_HARD)
      .default(DEFAULT_IDLE_TIMEOUT_SECONDS)
      .describe("The session is deleted after this many seconds without a call (10-86400). The administrator's maximum may be lower."),
    maxLifetimeSeconds: z
      .int()
      .min(10)
      .max(MAX_LIFETIME_SECONDS_HARD)
      .optional()
      .describe("The session is deleted this many seconds after creation, busy or not. Defaults to the administrator's setting."),
    packages: PackageListSchema.optional(),
  })
  // The profile made the session's pod (image, limits, placement), and it stays the session's
  // after: which packages may be installed into that pod is read from spec.profile at each
  // install, so an owner who could switch it would install under another profile's policy.
  .meta({
    'x-kubernetes-validations': [
      {
        rule: 'has(self.profile) == has(oldSelf.profile) && (!has(self.profile) || self.profile == oldSelf.profile)',
        message: "spec.profile cannot be changed: the session's pod was made from it; create a new session with the other profile",
      },
    ],
  });
export type SandboxSessionSpec = z.infer<typeof SandboxSessionSpecSchema>;

const timestamp = z.iso.datetime({ offset: true }).max(64);

export const SandboxSessionStatusSchema = z.object({
  phase: SessionPhaseSchema.optional().describe(
    'Pending (pod starting), Ready (accepts calls), Lost (the interpreter or pod is gone; create a new session) or Failed (never started).',
  ),
  podName: z.string().max(253).optional().describe('Name of the sandbox pod that hosts the interpreter.'),
  lastActivityTime: timestamp.optional().describe('When the session was last used (RFC 3339); idle garbage collection counts from here.'),
  expiresAt: timestamp.optional().describe('When the session will be deleted if it stays idle (RFC 3339), capped by maxLifetimeSeconds.'),
  runCount: z.int().min(0).optional().describe('Number of calls executed in the session.'),
  kernelLost: z
    .object({
      message: z.string().max(1024).describe('What the gateway saw (e.g. the exec stream closed).'),
      time: timestamp.describe('When (RFC 3339).'),
    })
    .optional()
    .describe(
      'Written by the gateway replica that saw the interpreter die; the controller then sets phase Lost. The gateway owns lastActivityTime, runCount and kernelLost; the controller every other field (server-side apply field managers).',
    ),
  observedGeneration: z.int().min(0).optional().describe('The metadata.generation this status was computed from.'),
  conditions: z
    .array(ConditionSchema)
    .max(MAX_CONDITIONS)
    .optional()
    .meta({
      description: 'Latest observations of the session: Ready (the interpreter accepts calls).',
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
    }),
  reason: z.string().max(MAX_REASON_LENGTH).optional().describe('Stable CamelCase reason of the current phase.'),
  message: z.string().max(MAX_MESSAGE_LENGTH).optional().describe('Human-readable explanation of the current phase.'),
});
export type SandboxSessionStatus = z.infer<typeof SandboxSessionStatusSchema>;

export const SandboxSessionSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(SANDBOXSESSION_KIND),
  metadata: ObjectMetaSchema,
  spec: SandboxSessionSpecSchema,
  status: SandboxSessionStatusSchema.optional(),
});
export type SandboxSession = z.infer<typeof SandboxSessionSchema>;

export function parseSandboxSession(obj: unknown): { ok: true; session: SandboxSession } | { ok: false; message: string } {
  const r = SandboxSessionSchema.safeParse(obj, { reportInput: true });
  if (r.success) return { ok: true, session: r.data };
  return { ok: false, message: `Invalid SandboxSession: ${describeIssues(r.error.issues)}.` };
}
