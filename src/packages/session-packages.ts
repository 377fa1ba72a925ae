// Packages for a SandboxSession: resolves the session's profile (its image and policy) and hands
// the installer everything it needs. One place for both callers — the session controller, which
// installs spec.packages before a session is Ready, and install_packages on a live session — so
// both apply the same policy to the same image.
import type { SandboxSession } from '../api/v1alpha1/index.js';
import { SANDBOXSESSION_KIND, API_VERSION, kernelLanguage } from '../api/v1alpha1/index.js';
import { isRefusal, type ProfileRefusal } from '../profiles/catalog.js';
import { builtinProfile, type ProfileDefaults, type ResolvedProfile } from '../profiles/profile.js';
import { runLabelValue } from '../sandbox/names.js';
import type { InstallResult, PackageInstaller } from './installer.js';
import { PackageError, checkRequested, ecosystemOf, packagePolicy, type PackageDefaults } from './policy.js';

export interface SessionPackagesDeps {
  installer: Pick<PackageInstaller, 'install'>;
  /** The SandboxProfiles; without it only the built-in profile. */
  profiles?: { resolve(name?: string): ResolvedProfile | ProfileRefusal };
  defaults: ProfileDefaults & PackageDefaults;
}

export class SessionPackages {
  private readonly builtin: ResolvedProfile;

  constructor(private readonly d: SessionPackagesDeps) {
    this.builtin = builtinProfile(d.defaults);
  }

  private profile(name: string | undefined): ResolvedProfile {
    const p = this.d.profiles?.resolve(name) ?? this.builtin;
    if (isRefusal(p)) throw new PackageError(p.message, p.hint, 'refused');
    return p;
  }

  /** Refuses at once what the policy refuses by name (before a session or a fetcher pod exists). */
  check(profile: string | undefined, language: SandboxSession['spec']['language'], packages: readonly string[]): void {
    const l = kernelLanguage(language);
    checkRequested(packagePolicy(this.profile(profile).packages, this.d.defaults), ecosystemOf(l), l, packages);
  }

  /** Installs into the session's pod; throws PackageError with which package and why. */
  install(session: SandboxSession, pod: string, packages: readonly string[]): Promise<InstallResult> {
    const profile = this.profile(session.spec.profile);
    const language = kernelLanguage(session.spec.language);
    return this.d.installer.install(
      {
        namespace: session.metadata.namespace ?? '',
        pod,
        language,
        image: profile.shape.images[language],
        ...(profile.shape.runtimeClassName !== undefined && { runtimeClassName: profile.shape.runtimeClassName }),
        placement: profile.shape,
        owner: { apiVersion: API_VERSION, kind: SANDBOXSESSION_KIND, name: session.metadata.name, uid: session.metadata.uid ?? '', controller: false },
        sessionLabel: runLabelValue(session.metadata.name),
        ...(session.spec.owner && { user: session.spec.owner.user }),
        ...(profile.packages !== undefined && { policy: profile.packages }),
      },
      packages,
    );
  }
}

/** One line for a caller: what was installed, dependencies counted. */
export function describeInstall(r: InstallResult, requested: readonly string[]): string {
  if (r.installed.length === 0) return `Nothing to install: ${requested.join(', ')} ${requested.length === 1 ? 'is' : 'are'} already in the sandbox.`;
  const list = r.installed.map((p) => `${p.name} ${p.version}`).join(', ');
  return `Installed ${r.installed.length} package${r.installed.length === 1 ? '' : 's'} (${list}; ${r.bytes} bytes copied in).`;
}
