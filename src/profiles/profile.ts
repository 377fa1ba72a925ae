// What a profile decides about a sandbox, resolved from a SandboxProfile (or the gateway's own
// settings for the built-in one): pure, so every replica resolves a profile the same way and pool
// pods built from it hash the same. Settings a profile leaves out are the gateway's.
import { BUILTIN_PROFILE, MIN_MEMORY, MIN_MEMORY_BYTES, MIN_MEMORY_HINT, type PackagePolicySpec, type SandboxProfile } from '../api/v1alpha1/index.js';
import type { Config } from '../config/index.js';
import { parseQuantity } from '../config/quantity.js';
import type { SandboxPlacement } from '../sandbox/pod.js';

/** The settings a profile decides; the rest of the run engine's settings stay the gateway's. */
export type SandboxShape = Pick<
  Config,
  'images' | 'defaultCpu' | 'defaultMemory' | 'maxCpu' | 'maxMemory' | 'runtimeClassName' | 'workspaceMedium' | 'workspaceSizeLimit'
> &
  SandboxPlacement;

/** The gateway's own settings a profile starts from. */
export type ProfileDefaults = SandboxShape & Pick<Config, 'warmPoolMin' | 'warmPoolMax'>;

export interface ResolvedProfile {
  name: string;
  /** Built from the gateway's settings (no SandboxProfile of this name exists). */
  builtin: boolean;
  /** The SandboxProfile's uid: its pool pods are owned by it, so deleting it removes them. */
  uid?: string;
  description?: string;
  shape: SandboxShape;
  pool: { min: number; max: number };
  /** Python modules warm kernels import before a claim. */
  preImport: readonly string[];
  /** What sessions may install, as the SandboxProfile says (src/packages fills in the gateway's settings). */
  packages?: PackagePolicySpec;
}

export function builtinProfile(d: ProfileDefaults): ResolvedProfile {
  const { warmPoolMin, warmPoolMax, ...shape } = d;
  return { name: BUILTIN_PROFILE, builtin: true, shape: { ...shape }, pool: { min: warmPoolMin, max: warmPoolMax }, preImport: [] };
}

function above(a: string, b: string): boolean {
  return parseQuantity(a) > parseQuantity(b);
}

/**
 * A SandboxProfile resolved against the gateway's settings, or a sentence saying why it cannot be
 * used (a default above its own maximum).
 */
export function resolveProfile(p: SandboxProfile, d: ProfileDefaults): ResolvedProfile | { invalid: string } {
  const s = p.spec;
  const shape: SandboxShape = {
    images: { python: s.image, bash: s.image, sh: s.image, node: s.image },
    defaultCpu: s.resources?.cpu ?? d.defaultCpu,
    defaultMemory: s.resources?.memory ?? d.defaultMemory,
    maxCpu: s.maxResources?.cpu ?? d.maxCpu,
    maxMemory: s.maxResources?.memory ?? d.maxMemory,
    workspaceMedium: s.workspace?.medium ?? d.workspaceMedium,
    workspaceSizeLimit: s.workspace?.sizeLimit ?? d.workspaceSizeLimit,
    ...((s.runtimeClassName ?? d.runtimeClassName) !== undefined && { runtimeClassName: s.runtimeClassName ?? d.runtimeClassName }),
    // Placement is the profile's alone: the gateway has no node settings of its own.
    ...(s.nodeSelector !== undefined && Object.keys(s.nodeSelector).length > 0 && { nodeSelector: s.nodeSelector }),
    ...(s.tolerations !== undefined && s.tolerations.length > 0 && { tolerations: s.tolerations }),
  };
  if (above(shape.defaultCpu, shape.maxCpu)) return { invalid: `its default cpu ${shape.defaultCpu} is above its maximum ${shape.maxCpu}` };
  if (above(shape.defaultMemory, shape.maxMemory)) return { invalid: `its default memory ${shape.defaultMemory} is above its maximum ${shape.maxMemory}` };
  for (const [what, q] of [
    ['default memory', shape.defaultMemory],
    ['maximum memory', shape.maxMemory],
  ] as const)
    if (parseQuantity(q) < MIN_MEMORY_BYTES) return { invalid: `its ${what} ${q} is below the minimum of ${MIN_MEMORY}: use ${MIN_MEMORY_HINT}` };
  return {
    name: p.metadata.name,
    builtin: false,
    ...(p.metadata.uid !== undefined && { uid: p.metadata.uid }),
    ...(s.description !== undefined && { description: s.description }),
    shape,
    pool: { min: s.warmPool?.min ?? 0, max: s.warmPool?.max ?? 0 },
    preImport: [...new Set(s.preImport ?? [])],
    ...(s.packages !== undefined && { packages: s.packages }),
  };
}
