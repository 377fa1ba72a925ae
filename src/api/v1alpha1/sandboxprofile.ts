// SandboxProfile: a kind of sandbox an administrator offers (issue 12) — its image, resource
// defaults and maxima, RuntimeClass, warm pool and the Python modules its warm kernels import
// ahead of any claim. Runs and sessions name one with `profile`; without it they get the gateway's
// default profile (CODEMODE_DEFAULT_PROFILE), which is built from the gateway's own settings
// unless a SandboxProfile of that name exists. The leader writes each profile's pool in its status.
import { z } from 'zod';
import { ConditionSchema } from './conditions.js';
import { PackagePolicySchema } from './packages.js';
import { API_VERSION, MAX_CONDITIONS, ObjectMetaSchema, PROFILE_NAME_PATTERN, QuantitySchema, describeIssues } from './sandboxrun.js';

export const SANDBOXPROFILE_KIND = 'SandboxProfile';
export const SANDBOXPROFILE_PLURAL = 'sandboxprofiles';
/** The profile built from the gateway's settings when no SandboxProfile of this name exists. */
export const BUILTIN_PROFILE = 'default';
/** Largest warm pool one profile may ask for. */
export const MAX_PROFILE_POOL = 50;
export const MAX_PREIMPORTS = 32;

/** Reasons of a SandboxProfile's Ready condition. */
export const ProfileReasons = {
  /** Valid; runs and sessions may use it. */
  Accepted: 'Accepted',
  /** The spec is invalid (the message says which field); runs naming it are refused. */
  InvalidSpec: 'InvalidSpec',
} as const;

const ResourcesSchema = z.object({
  cpu: QuantitySchema.optional().describe('CPU in cores, e.g. 500m or 2.'),
  memory: QuantitySchema.optional().describe('Memory, e.g. 512Mi or 4Gi.'),
});

/** Where a sandbox's /workspace lives (CODEMODE_WORKSPACE_MEDIUM, SandboxProfile spec.workspace.medium). */
export const WorkspaceMediumSchema = z.enum(['Disk', 'Memory']);
export type WorkspaceMedium = z.infer<typeof WorkspaceMediumSchema>;

const WorkspaceSchema = z.object({
  medium: WorkspaceMediumSchema.optional().describe(
    "Disk: an emptyDir on the node's disk (may hold more than the memory limit; its files are counted from inside the sandbox, each at least 4 KiB, and its disk bandwidth is not bounded). Memory: a tmpfs with a hard size whose files count against the memory limit, and no disk writes. Default: the gateway's (CODEMODE_WORKSPACE_MEDIUM).",
  ),
  sizeLimit: QuantitySchema.optional().describe("Size limit of /workspace, e.g. 2Gi (default: the gateway's, CODEMODE_WORKSPACE_SIZE_LIMIT)."),
});

const PYTHON_MODULE = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;

/** A label key as Kubernetes accepts it: an optional DNS-subdomain prefix and a name of 1–63 characters. */
const LABEL_KEY = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;
export const MAX_NODE_SELECTOR = 16;
export const MAX_TOLERATIONS = 16;

const labelKey = z.string().max(316).regex(LABEL_KEY, { error: 'must be a label key such as node-role.example.com/sandbox or pool' });

const TolerationSchema = z
  .object({
    key: labelKey.optional().describe('The taint key it tolerates; empty with operator Exists: every taint.'),
    operator: z.enum(['Exists', 'Equal']).optional().describe('Equal (default): the taint value must be value; Exists: any value.'),
    value: z.string().max(63).regex(LABEL_VALUE, { error: 'must be a label value' }).optional().describe('The taint value (operator Equal).'),
    effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']).optional().describe('The taint effect it tolerates; empty: all.'),
    tolerationSeconds: z.int().min(0).max(86_400).optional().describe('With effect NoExecute: how long the pod stays after the taint appears.'),
  })
  .refine((t) => t.operator !== 'Exists' || t.value === undefined, { error: 'operator Exists takes no value' })
  .refine((t) => t.key !== undefined || t.operator === 'Exists', { error: 'a toleration without key needs operator Exists' })
  .meta({
    'x-kubernetes-validations': [
      { rule: "!has(self.operator) || self.operator != 'Exists' || !has(self.value)", message: 'operator Exists takes no value' },
      { rule: "has(self.key) || (has(self.operator) && self.operator == 'Exists')", message: 'a toleration without key needs operator Exists' },
    ],
  });
export type Toleration = z.infer<typeof TolerationSchema>;

export const SandboxProfileSpecSchema = z.object({
  description: z.string().max(512).optional().describe('One sentence for agents choosing a profile (shown by the gateway).'),
  image: z
    .string()
    .min(1)
    .max(512)
    .regex(/^[A-Za-z0-9][A-Za-z0-9._\-/:@]*$/, { error: 'must be a container image reference such as registry.example.com/datascience:v1' })
    .describe('Image of every sandbox of this profile (all languages): it must have python3 (the kernel), and node and bash for those languages.'),
  resources: ResourcesSchema.optional().describe("Limits a run or session of this profile gets when it asks for none (default: the gateway's)."),
  maxResources: ResourcesSchema.optional().describe("Most a run of this profile may ask for (default: the gateway's maxima)."),
  workspace: WorkspaceSchema.optional().describe("Where this profile's /workspace lives and how large it may grow (default: the gateway's)."),
  runtimeClassName: z
    .string()
    .max(253)
    .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, { error: 'must be the name of a RuntimeClass' })
    .optional()
    .describe("RuntimeClass of this profile's pods, e.g. gvisor (default: the gateway's)."),
  nodeSelector: z
    .record(z.string(), z.string().max(63).regex(LABEL_VALUE, { error: 'must be a label value (at most 63 letters, digits, "-", "_", ".")' }))
    .superRefine((m, ctx) => {
      const keys = Object.keys(m);
      if (keys.length > MAX_NODE_SELECTOR) ctx.addIssue({ code: 'custom', message: `at most ${MAX_NODE_SELECTOR} labels` });
      // zod reports a bad record key without its own message: say what a key must be.
      for (const k of keys)
        if (!labelKey.safeParse(k).success)
          ctx.addIssue({ code: 'custom', path: [k], message: 'must be a label key such as node-role.example.com/sandbox or pool' });
    })
    .meta({ maxProperties: MAX_NODE_SELECTOR })
    .optional()
    .describe("Node labels this profile's pods (runs, sessions, pool, package installs) must be scheduled on, e.g. nodes kept for sandboxes."),
  tolerations: z
    .array(TolerationSchema)
    .max(MAX_TOLERATIONS)
    .optional()
    .describe("Taints this profile's pods tolerate, e.g. the taint that keeps other workloads off sandbox nodes."),
  warmPool: z
    .object({
      min: z.int().min(0).max(MAX_PROFILE_POOL).default(0).describe('Ready pods kept at all times.'),
      max: z.int().min(0).max(MAX_PROFILE_POOL).default(0).describe('Most ready pods demand may ask for; 0 disables the pool (and drains it).'),
    })
    .refine((p) => p.min <= p.max, { error: 'min must not be above max' })
    .meta({ 'x-kubernetes-validations': [{ rule: 'self.min <= self.max', message: 'min must not be above max' }] })
    .optional()
    .describe('Pre-started pods of this profile, sized by demand between min and max (default: none).'),
  preImport: z
    .array(z.string().max(128).regex(PYTHON_MODULE, { error: 'must be a Python module name such as numpy or matplotlib.pyplot' }))
    .max(MAX_PREIMPORTS)
    .optional()
    .describe(
      'Python modules a warm kernel imports before it is claimed, so a warm run or a new session does not pay for them (a module that fails to import is skipped).',
    ),
  packages: PackagePolicySchema.optional(),
});
export type SandboxProfileSpec = z.infer<typeof SandboxProfileSpecSchema>;

export const SandboxProfileStatusSchema = z.object({
  observedGeneration: z.int().min(0).optional().describe('The metadata.generation this status was computed from.'),
  conditions: z
    .array(ConditionSchema)
    .max(MAX_CONDITIONS)
    .optional()
    .meta({
      description: 'Ready: True when the spec is valid and runs may use the profile.',
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
    }),
  readyPods: z.int().min(0).optional().describe("Ready, unclaimed warm pods of this profile (the leader's count)."),
  targetPods: z.int().min(0).optional().describe('The pool size the leader aims for now (demand, between min and max).'),
});
export type SandboxProfileStatus = z.infer<typeof SandboxProfileStatusSchema>;

export const SandboxProfileSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(SANDBOXPROFILE_KIND),
  metadata: ObjectMetaSchema,
  spec: SandboxProfileSpecSchema,
  status: SandboxProfileStatusSchema.optional(),
});
export type SandboxProfile = z.infer<typeof SandboxProfileSchema>;

export function parseSandboxProfile(obj: unknown): { ok: true; profile: SandboxProfile } | { ok: false; message: string } {
  const r = SandboxProfileSchema.safeParse(obj, { reportInput: true });
  if (r.success) {
    if (!PROFILE_NAME_PATTERN.test(r.data.metadata.name)) {
      return { ok: false, message: 'Invalid SandboxProfile: its name must be a DNS-1123 label of at most 40 characters. Recreate it under a shorter name.' };
    }
    return { ok: true, profile: r.data };
  }
  return { ok: false, message: `Invalid SandboxProfile: ${describeIssues(r.error.issues)}. Fix the spec with kubectl edit sandboxprofile.` };
}
