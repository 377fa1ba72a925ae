// The profiles of the namespace: an informer on SandboxProfiles plus the built-in profile made of
// the gateway's settings. Every replica resolves from its own cache; the leader writes each
// profile's status (valid or not, its pool's ready and target counts). Without the SandboxProfile
// CRD (a `helm upgrade` does not apply CRDs) only the built-in profile exists.
import type { KubernetesObject } from '@kubernetes/client-node';
import { setHeaderOptions } from '@kubernetes/client-node/dist/middleware.js';
import { PatchStrategy } from '@kubernetes/client-node/dist/patch.js';
import type { Logger } from 'pino';
import {
  API_VERSION,
  BUILTIN_PROFILE,
  GROUP,
  ProfileReasons,
  SANDBOXPROFILE_KIND,
  SANDBOXPROFILE_PLURAL,
  VERSION,
  parseSandboxProfile,
  setCondition,
  type SandboxProfileStatus,
} from '../api/v1alpha1/index.js';
import { customResourceInformer, type ResilientInformer } from '../kube/informer.js';
import { apiErrorMessage, isConflict, isNotFound, type KubeClients } from '../kube/clients.js';
import { stableStringify } from '../sandbox/template-hash.js';
import { builtinProfile, resolveProfile, type ProfileDefaults, type ResolvedProfile, type SandboxShape } from './profile.js';

export const PROFILE_FIELD_MANAGER = 'codemode-gateway-profiles';

export interface ProfileCatalogDeps {
  clients: KubeClients;
  namespace: string;
  defaults: ProfileDefaults;
  /** The profile of runs and sessions that name none (CODEMODE_DEFAULT_PROFILE). */
  defaultProfile: string;
  log: Logger;
}

/** Why a profile cannot be used, and what to do. */
export interface ProfileRefusal {
  message: string;
  hint: string;
}

type Entry = { ok: true; profile: ResolvedProfile } | { ok: false; message: string; uid?: string };

export class ProfileCatalog {
  private readonly informer: ResilientInformer<KubernetesObject>;
  private readonly builtin: ResolvedProfile;
  private readonly listeners: Array<() => void> = [];
  /** The last parse of each SandboxProfile, kept while the informer holds the same object. */
  private readonly parsed = new Map<string, { obj: KubernetesObject; entry: Entry }>();
  private running = false;

  constructor(private readonly d: ProfileCatalogDeps) {
    this.builtin = builtinProfile(d.defaults);
    const ns = d.namespace;
    this.informer = customResourceInformer(d.clients, ns, SANDBOXPROFILE_PLURAL, d.log);
    this.informer.onChange((o) => {
      if (o.metadata?.deletionTimestamp || !this.informer.get(o.metadata?.name ?? '', this.d.namespace)) this.parsed.delete(o.metadata?.name ?? '');
      this.changed();
    });
  }

  get defaultName(): string {
    return this.d.defaultProfile;
  }

  /** Lists and watches SandboxProfiles; without their CRD only the built-in profile exists. */
  async start(): Promise<void> {
    try {
      await this.informer.start();
      this.running = true;
    } catch (err) {
      if (!isNotFound(err)) throw new Error(`Cannot list SandboxProfiles in namespace ${this.d.namespace}: ${apiErrorMessage(err)}`, { cause: err });
      this.d.log.warn(
        'The SandboxProfile CRD is not installed: only the built-in profile exists. Apply it (kubectl apply --server-side -f crds/) and restart the gateway.',
      );
      await this.informer.stop();
    }
    this.changed();
  }

  async stop(): Promise<void> {
    if (this.running) await this.informer.stop();
    this.running = false;
  }

  /** Called after any profile changed (pools follow their profiles). */
  onChange(cb: () => void): void {
    this.listeners.push(cb);
  }

  /** The profile `name` (default: the default profile), or why it cannot be used. */
  resolve(name?: string): ResolvedProfile | ProfileRefusal {
    const wanted = name ?? this.d.defaultProfile;
    const e = this.entry(wanted);
    if (e?.ok) return e.profile;
    const available = this.all().map((p) => p.name);
    if (e)
      return { message: `Profile ${wanted} cannot be used: ${e.message}`, hint: 'Ask the administrator to fix the SandboxProfile, or use another profile.' };
    return {
      message: name === undefined ? `The default profile ${wanted} does not exist.` : `Unknown profile ${wanted}.`,
      hint: `Use one of: ${available.join(', ') || '(none)'}${name === undefined ? ', or ask the administrator to create the default profile' : ', or leave profile out for the default'}.`,
    };
  }

  /** What a sandbox of the default profile looks like; the gateway's own settings when it cannot be used. */
  defaultShape(): SandboxShape {
    const p = this.resolve();
    return isRefusal(p) ? this.builtin.shape : p.shape;
  }

  /** Every usable profile: the built-in one (unless a SandboxProfile replaces it) and the valid SandboxProfiles. */
  all(): ResolvedProfile[] {
    const out = new Map<string, ResolvedProfile>([[BUILTIN_PROFILE, this.builtin]]);
    for (const o of this.objects()) {
      const e = this.entry(o.metadata?.name ?? '');
      if (e?.ok) out.set(e.profile.name, e.profile);
      else if (o.metadata?.name === BUILTIN_PROFILE) out.delete(BUILTIN_PROFILE);
    }
    return [...out.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  /**
   * Leader only: writes a SandboxProfile's status — Ready (valid or why not) and its pool's counts —
   * when it differs from what the cache shows (no write otherwise).
   */
  async writeStatus(name: string, pool: { ready: number; target: number }): Promise<void> {
    const obj = this.informer.get(name, this.d.namespace) as (KubernetesObject & { status?: SandboxProfileStatus }) | undefined;
    if (!obj || obj.metadata?.deletionTimestamp) return;
    const e = this.entry(name);
    const next = nextProfileStatus(obj.status, obj.metadata?.generation, e?.ok === true ? undefined : (e?.message ?? 'not found'), pool, new Date());
    if (!next) return;
    try {
      await this.d.clients.custom.patchNamespacedCustomObjectStatus(
        {
          group: GROUP,
          version: VERSION,
          namespace: this.d.namespace,
          plural: SANDBOXPROFILE_PLURAL,
          name,
          body: { apiVersion: API_VERSION, kind: SANDBOXPROFILE_KIND, metadata: { name, namespace: this.d.namespace }, status: next },
          fieldManager: PROFILE_FIELD_MANAGER,
          force: true,
        },
        setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
      );
    } catch (err) {
      if (isNotFound(err) || isConflict(err)) return;
      this.d.log.warn({ profile: name, err: apiErrorMessage(err) }, 'Failed to write the status of a SandboxProfile');
    }
  }

  /** Names of the SandboxProfiles in the cache (valid or not): their status is written. */
  names(): string[] {
    return this.objects().map((o) => o.metadata?.name ?? '');
  }

  private objects(): KubernetesObject[] {
    return this.running ? this.informer.list(this.d.namespace).filter((o) => !o.metadata?.deletionTimestamp) : [];
  }

  private entry(name: string): Entry | undefined {
    const obj = this.running ? this.informer.get(name, this.d.namespace) : undefined;
    if (!obj || obj.metadata?.deletionTimestamp) return name === BUILTIN_PROFILE ? { ok: true, profile: this.builtin } : undefined;
    // Every run resolves its profile (the gateway, then the executor): parse each cached object once.
    const cached = this.parsed.get(name);
    if (cached?.obj === obj) return cached.entry;
    const entry = this.parse(name, obj);
    this.parsed.set(name, { obj, entry });
    return entry;
  }

  private parse(name: string, obj: KubernetesObject): Entry {
    const parsed = parseSandboxProfile(obj);
    if (!parsed.ok) return { ok: false, message: parsed.message };
    const r = resolveProfile(parsed.profile, this.d.defaults);
    return 'invalid' in r
      ? { ok: false, message: `Invalid SandboxProfile: ${r.invalid}. Fix it with kubectl edit sandboxprofile ${name}.` }
      : { ok: true, profile: r };
  }

  private changed(): void {
    for (const cb of this.listeners) cb();
  }
}

/**
 * Pure: the status a SandboxProfile should have — Ready (valid, or `invalid` says why) and its
 * pool's counts — or undefined when `current` already says so. Compared key-order-free: the API
 * server returns keys sorted, and a plain comparison would write on every pass.
 */
export function nextProfileStatus(
  current: SandboxProfileStatus | undefined,
  generation: number | undefined,
  invalid: string | undefined,
  pool: { ready: number; target: number },
  now: Date,
): SandboxProfileStatus | undefined {
  const conditions = setCondition(
    current?.conditions,
    {
      type: 'Ready',
      status: invalid === undefined ? 'True' : 'False',
      reason: invalid === undefined ? ProfileReasons.Accepted : ProfileReasons.InvalidSpec,
      message: invalid === undefined ? 'Runs and sessions may use this profile.' : invalid.slice(0, 4096),
      ...(generation !== undefined && { observedGeneration: generation }),
    },
    now,
  );
  const next: SandboxProfileStatus = {
    ...(generation !== undefined && { observedGeneration: generation }),
    conditions,
    readyPods: invalid === undefined ? pool.ready : 0,
    targetPods: invalid === undefined ? pool.target : 0,
  };
  return stableStringify(next) === stableStringify(current ?? {}) ? undefined : next;
}

export function isRefusal(r: ResolvedProfile | ProfileRefusal): r is ProfileRefusal {
  return 'hint' in r && !('shape' in r);
}
