// The Secrets UpstreamServers name, each followed by name (a read, then a watch with a
// metadata.name field selector), so RBAC can grant exactly those names. Values are decoded here
// and handed only to the upstream connections; nothing here logs or returns them otherwise.
import type { CoreV1Api, KubeConfig, V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { SecretWatch } from '../auth/secret-watch.js';
import { apiErrorMessage, statusOf } from '../kube/clients.js';
import type { SecretKeyRef } from '../api/v1alpha1/index.js';

export type SecretState = { kind: 'unknown' } | { kind: 'missing'; message: string } | { kind: 'present'; data: ReadonlyMap<string, string> };

/** A key's value, or why there is none (safe to show: names only, never values). */
export type Resolved = { ok: true; value: string } | { ok: false; pending: boolean; message: string };

/** Pure: the value of `ref` in a Secret's state. */
export function resolveRef(ref: SecretKeyRef, state: SecretState): Resolved {
  if (state.kind === 'unknown') return { ok: false, pending: true, message: `Reading Secret ${ref.name}.` };
  if (state.kind === 'missing') return { ok: false, pending: false, message: state.message };
  const value = state.data.get(ref.key);
  if (value === undefined)
    return { ok: false, pending: false, message: `Secret ${ref.name} has no key ${ref.key}; add it or name another key in the UpstreamServer.` };
  return { ok: true, value };
}

function decode(s: V1Secret): Map<string, string> {
  const out = new Map<string, string>();
  for (const [k, v] of Object.entries(s.data ?? {})) out.set(k, Buffer.from(v, 'base64').toString('utf8').trim());
  for (const [k, v] of Object.entries(s.stringData ?? {})) out.set(k, v.trim());
  return out;
}

export class SecretCache {
  private readonly watches = new Map<string, SecretWatch>();
  private readonly states = new Map<string, SecretState>();

  constructor(
    private readonly kc: KubeConfig,
    private readonly core: CoreV1Api,
    private readonly namespace: string,
    private readonly log: Logger,
    /** Told when a Secret's state changes (by name). */
    private readonly onChange: (name: string) => void,
  ) {}

  get(name: string): SecretState {
    return this.states.get(name) ?? { kind: 'unknown' };
  }

  /** Follows exactly `names` from now on: new ones are watched, ones no longer named dropped. */
  retain(names: ReadonlySet<string>): void {
    for (const [name, watch] of this.watches) {
      if (names.has(name)) continue;
      void watch.stop();
      this.watches.delete(name);
      this.states.delete(name);
    }
    for (const name of names) {
      if (this.watches.has(name)) continue;
      const watch = new SecretWatch(
        this.kc,
        this.core,
        this.namespace,
        name,
        (s) => this.set(name, s ? { kind: 'present', data: decode(s) } : missing(name)),
        this.log,
        {
          what: `Secret ${name} of an UpstreamServer`,
          onError: (err) => this.set(name, unreadable(name, err)),
        },
      );
      this.watches.set(name, watch);
      void watch.start();
    }
  }

  async stop(): Promise<void> {
    await Promise.all([...this.watches.values()].map((w) => w.stop()));
    this.watches.clear();
    this.states.clear();
  }

  private set(name: string, state: SecretState): void {
    if (!this.watches.has(name)) return;
    this.states.set(name, state);
    this.onChange(name);
  }
}

function missing(name: string): SecretState {
  return { kind: 'missing', message: `Secret ${name} does not exist in this namespace; create it or name another Secret in the UpstreamServer.` };
}

function unreadable(name: string, err: unknown): SecretState {
  const hint = statusOf(err) === 403 ? ' The gateway may not read it: add it to the chart value upstreams.secretNames.' : '';
  return { kind: 'missing', message: `Cannot read Secret ${name}: ${apiErrorMessage(err)}.${hint}` };
}
