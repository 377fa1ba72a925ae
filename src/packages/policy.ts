// Pure decisions of an install: which registry a session's language uses, whether the profile
// allows what was asked for and everything it resolved to (dependencies included), and reading
// what the fetcher pod printed — pip's installation report, npm's lockfile, the fetch summary —
// as untrusted input: validated, bounded, and every refusal a sentence naming the package.
import { z } from 'zod';
import { NPM_REQUIREMENT, PYPI_REQUIREMENT, type Ecosystem, type KernelLanguage, type PackagePolicySpec } from '../api/v1alpha1/index.js';
import type { Config } from '../config/index.js';
import { cutUnits, withoutControls } from '../util/text.js';

export interface PackagePolicy {
  ecosystems: readonly Ecosystem[];
  allow: readonly string[];
  deny: readonly string[];
  maxPackageBytes: number;
  maxTotalBytes: number;
}

export type PackageDefaults = Pick<Config, 'packagesEcosystems' | 'packagesAllow' | 'packagesDeny' | 'packagesMaxPackageBytes' | 'packagesMaxTotalBytes'>;

/** A profile's policy: each field it leaves out is the gateway's. */
export function packagePolicy(spec: PackagePolicySpec | undefined, d: PackageDefaults): PackagePolicy {
  return {
    ecosystems: spec?.ecosystems ?? d.packagesEcosystems,
    allow: spec?.allow ?? d.packagesAllow,
    deny: spec?.deny ?? d.packagesDeny,
    maxPackageBytes: spec?.maxPackageBytes ?? d.packagesMaxPackageBytes,
    maxTotalBytes: spec?.maxTotalBytes ?? d.packagesMaxTotalBytes,
  };
}

/** Most UTF-16 units of a PackageError's message (each part it quotes is bounded too). */
export const MAX_PACKAGE_MESSAGE = 1000;

/**
 * A package error's text as callers, statuses and Events get it: much of it quotes what the
 * fetcher pod printed (pip's, npm's and the index's words, package names and files), so control
 * characters become spaces, any `user:password@` in a URL goes (a private index's credentials,
 * whoever printed them) and the whole is bounded.
 */
export function packageMessage(text: string): string {
  return cutUnits(withoutControls(text).replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@]*@/gi, '$1'), MAX_PACKAGE_MESSAGE);
}

/** Refused before anything is fetched or installed: the message names the package and why. */
export class PackageError extends Error {
  constructor(
    message: string,
    readonly hint: string,
    /** refused: the policy or a limit said no; failed: resolving, fetching or delivering did not work. */
    readonly kind: 'refused' | 'failed',
  ) {
    super(packageMessage(message));
    this.name = 'PackageError';
  }
}

export function ecosystemOf(language: KernelLanguage): Ecosystem | undefined {
  if (language === 'python') return 'pypi';
  if (language === 'node') return 'npm';
  return undefined;
}

/** The name a registry knows a package by: PEP 503 normalisation for PyPI; npm names as they are. */
export function normalizeName(eco: Ecosystem, name: string): string {
  return eco === 'pypi' ? name.toLowerCase().replace(/[-_.]+/g, '-') : name;
}

/** The package name in a requirement (`tabulate[x]>=1` → tabulate, `@s/p@^1` → @s/p). */
export function requirementName(eco: Ecosystem, req: string): string {
  if (eco === 'pypi') return normalizeName(eco, /^[A-Za-z0-9._-]+/.exec(req)?.[0] ?? req);
  const at = req.indexOf('@', req.startsWith('@') ? 1 : 0);
  return at < 0 ? req : req.slice(0, at);
}

interface Entry {
  ecosystem: Ecosystem;
  name: string;
  version?: string;
}

function parseEntry(e: string): Entry {
  const [eco, rest = ''] = e.split(/:(.*)/s) as [Ecosystem, string];
  if (eco === 'pypi') {
    const [name = '', version] = rest.split('==');
    return { ecosystem: eco, name: normalizeName(eco, name), ...(version !== undefined && { version }) };
  }
  const at = rest.indexOf('@', rest.startsWith('@') ? 1 : 0);
  return at < 0 ? { ecosystem: eco, name: rest } : { ecosystem: eco, name: rest.slice(0, at), version: rest.slice(at + 1) };
}

function matches(entries: readonly string[], eco: Ecosystem, name: string, version?: string): string | undefined {
  return entries.find((raw) => {
    const e = parseEntry(raw);
    return e.ecosystem === eco && e.name === name && (e.version === undefined || version === undefined || e.version === version);
  });
}

const label = (eco: Ecosystem): string => (eco === 'pypi' ? 'PyPI' : 'npm');

/**
 * The requirements a caller asked for, checked before any pod starts: the right syntax for the
 * session's language, the registry enabled, no name denied and (with an allow list) every name
 * allowed. Throws PackageError; returns the requirements deduplicated.
 */
export function checkRequested(policy: PackagePolicy, eco: Ecosystem | undefined, language: string, requested: readonly string[]): string[] {
  if (eco === undefined)
    throw new PackageError(
      `A ${language} session cannot install packages.`,
      'Install PyPI packages in a python session, npm packages in a node session.',
      'refused',
    );
  if (!policy.ecosystems.includes(eco))
    throw new PackageError(
      `This profile does not allow installing ${label(eco)} packages.`,
      'Use a profile that allows them, or ask the administrator (SandboxProfile spec.packages.ecosystems, CODEMODE_PACKAGES_ECOSYSTEMS).',
      'refused',
    );
  const pattern = eco === 'pypi' ? PYPI_REQUIREMENT : NPM_REQUIREMENT;
  for (const r of requested) {
    if (!pattern.test(r))
      throw new PackageError(
        `"${r.slice(0, 200)}" is not a ${label(eco)} requirement.`,
        eco === 'pypi'
          ? 'Give a name with an optional version, e.g. tabulate or tabulate==0.9.0.'
          : 'Give a name with an optional version, e.g. is-number or is-number@7.0.0.',
        'refused',
      );
    const name = requirementName(eco, r);
    // A denied version alone does not refuse the name: the resolution may pick another (checkResolved).
    const denied = policy.deny.find((raw) => {
      const e = parseEntry(raw);
      return e.ecosystem === eco && e.name === name && e.version === undefined;
    });
    if (denied)
      throw new PackageError(
        `${name} may not be installed: the profile's deny list has ${denied}.`,
        'Use another package, or ask the administrator.',
        'refused',
      );
    if (policy.allow.length > 0 && !matches(policy.allow, eco, name))
      throw new PackageError(
        `${name} may not be installed: it is not in the profile's allow list.`,
        'Ask the administrator to allow it, or use a package that is allowed.',
        'refused',
      );
  }
  return [...new Set(requested)];
}

/** One package the resolution chose: what the fetcher will download, pinned. */
export interface ResolvedPackage {
  name: string;
  version: string;
  /** PyPI: the wheel's sha256 (pip checks it). */
  sha256?: string;
}

/** Every resolved package, dependencies included, against the deny and allow lists. */
export function checkResolved(policy: PackagePolicy, eco: Ecosystem, resolved: readonly ResolvedPackage[]): void {
  for (const p of resolved) {
    const denied = matches(policy.deny, eco, p.name, p.version);
    if (denied)
      throw new PackageError(
        `${p.name} ${p.version} may not be installed (needed by what you asked for): the profile's deny list has ${denied}.`,
        'Ask for another version or package, or ask the administrator.',
        'refused',
      );
    if (policy.allow.length > 0 && !matches(policy.allow, eco, p.name, p.version))
      throw new PackageError(
        `${p.name} ${p.version} may not be installed (needed by what you asked for): it is not in the profile's allow list.`,
        'Ask the administrator to allow it (dependencies need entries too).',
        'refused',
      );
  }
}

const MAX_RESOLVED = 300;
const NAME = z
  .string()
  .min(1)
  .max(214)
  .regex(/^[A-Za-z0-9@][A-Za-z0-9._~/@-]*$/);
const VERSION = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9.+!_-]+$/);
/** A PEP 508 project name: the fetch step writes it into a requirements file, where '/' or '@' would make a path or a URL. */
const PYPI_NAME = z
  .string()
  .max(214)
  .regex(/^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$/);

const PipReportSchema = z.object({
  install: z
    .array(
      z.object({
        metadata: z.object({ name: PYPI_NAME, version: VERSION }),
        download_info: z.object({
          url: z.string().max(4096),
          archive_info: z.object({ hashes: z.object({ sha256: z.string().regex(/^[0-9a-f]{64}$/) }) }).optional(),
        }),
      }),
    )
    .max(MAX_RESOLVED),
});

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new PackageError(`The fetcher returned an unreadable ${what}.`, 'Try again; if it persists, the index or mirror may be misbehaving.', 'failed');
  }
}

const tooMany = (): PackageError => new PackageError(`The packages need more than ${MAX_RESOLVED} packages in all.`, 'Install fewer at a time.', 'refused');

/**
 * How many keys (own, enumerable) `o` has, counting no further than `limit` + 1. Checked before the
 * schemas: zod reads every element of an array or record before its size check, and keeps an issue
 * per bad one — 8 MiB of `"k":1` pairs held 440 MB of heap for a second.
 */
function countKeys(o: object, limit: number): number {
  let n = 0;
  for (const k in o) if (Object.hasOwn(o, k) && ++n > limit) break;
  return n;
}

/** pip's installation report (`pip install --dry-run --report`): the packages to install, each a pinned wheel. */
export function parsePipReport(text: string): ResolvedPackage[] {
  const json = parseJson(text, 'installation report');
  const install = (json as { install?: unknown } | null)?.install;
  if (Array.isArray(install) && install.length > MAX_RESOLVED) throw tooMany();
  const r = PipReportSchema.safeParse(json);
  if (!r.success)
    throw new PackageError('The fetcher returned an installation report this gateway cannot read.', 'Try again; if it persists, report it.', 'failed');
  return r.data.install.map((i) => {
    const sha256 = i.download_info.archive_info?.hashes.sha256;
    if (!i.download_info.url.split(/[?#]/)[0]?.endsWith('.whl') || !sha256)
      throw new PackageError(
        `${i.metadata.name} ${i.metadata.version} has no wheel with a sha256 for this sandbox (only wheels are installed: building from source would run the package's code).`,
        'Pick a version that publishes a wheel for this Python and platform.',
        'failed',
      );
    return { name: normalizeName('pypi', i.metadata.name), version: i.metadata.version, sha256 };
  });
}

const LockSchema = z.object({
  packages: z.record(
    z.string().max(4096),
    z.object({
      /** Only where the package is not the one its folder names: an alias ("x": "npm:other@1"). */
      name: z.string().max(214).optional(),
      version: z.string().max(64).optional(),
      resolved: z.string().max(4096).optional(),
      integrity: z.string().max(512).optional(),
      link: z.boolean().optional(),
    }),
  ),
});

/**
 * Whether `url` is the registry's tarball of name@version: `<registry>/<name>/-/<name without
 * scope>-<version>.tgz` exactly (a scope's '/' may come as %2f), the layout of npm's registry and
 * of the mirrors that proxy it. Compared as sent, not decoded, and whole: a path that only ended
 * so (…/evil-1.tgz%3F/x/-/x-1.tgz) could name one file here and another to a server.
 */
function isRegistryTarball(url: string, registry: URL, name: string, version: string): boolean {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return false;
  }
  const base = registry.pathname.endsWith('/') ? registry.pathname : `${registry.pathname}/`;
  const file = `/-/${name.slice(name.lastIndexOf('/') + 1)}-${version}.tgz`;
  const path = u.pathname.startsWith(base) ? u.pathname.slice(base.length) : undefined;
  return u.origin === registry.origin && (path === `${name}${file}` || path?.toLowerCase() === `${name.replace('/', '%2f')}${file}`.toLowerCase());
}

/** npm's lockfile: every package under node_modules, each from the registry with an integrity hash. */
export function parseNpmLock(text: string, registry: string): ResolvedPackage[] {
  const json = parseJson(text, 'lockfile');
  const packages = (json as { packages?: unknown } | null)?.packages;
  // Besides node_modules/…, a lockfile lists its root ("") and any workspaces: a few keys.
  if (typeof packages === 'object' && packages !== null && countKeys(packages, 2 * MAX_RESOLVED) > 2 * MAX_RESOLVED) throw tooMany();
  const r = LockSchema.safeParse(json);
  if (!r.success) throw new PackageError('The fetcher returned a lockfile this gateway cannot read.', 'Try again; if it persists, report it.', 'failed');
  const reg = new URL(registry);
  const out: ResolvedPackage[] = [];
  for (const [path, p] of Object.entries(r.data.packages)) {
    if (!path.startsWith('node_modules/')) continue;
    // An alias installs the package `p.name` in the folder of another name: the policy is about
    // what is installed, so the package's own name is the one checked and reported.
    const name = p.name ?? path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
    if (!NAME.safeParse(name).success || !p.version || !VERSION.safeParse(p.version).success)
      throw new PackageError(
        `The lockfile names a package this gateway cannot read (${path.slice(0, 120)}).`,
        'Try again; if it persists, report it.',
        'failed',
      );
    if (p.link || !p.integrity?.startsWith('sha512-') || (p.resolved !== undefined && !p.resolved.startsWith(`${reg.origin}/`)))
      throw new PackageError(
        `${name} ${p.version} does not come from the registry with an integrity hash (only registry tarballs are installed).`,
        'Ask for a package published to the registry.',
        'failed',
      );
    // npm ci fetches what `resolved` says: a dependency's npm-shrinkwrap.json can point a name at
    // another package's tarball, which would be installed under the name the policy checked.
    if (p.resolved !== undefined && !isRegistryTarball(p.resolved, reg, name, p.version))
      throw new PackageError(
        `${name} ${p.version} would be fetched from ${p.resolved.slice(0, 200)}, which is not the registry's tarball of ${name} ${p.version}.`,
        'Ask for another version or package (one of its dependencies pins a tarball of another package).',
        'failed',
      );
    out.push({ name, version: p.version });
    if (out.length > MAX_RESOLVED) throw tooMany();
  }
  return out;
}

const FetchSummarySchema = z.object({
  packages: z.array(z.object({ file: z.string().max(4096), bytes: z.int().min(0) })).max(MAX_RESOLVED),
  unpackedBytes: z.int().min(0),
  archiveBytes: z.int().min(1),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});
export type FetchSummary = z.infer<typeof FetchSummarySchema>;

/** What `fetch` printed, checked against the limits again (the gateway decides, not the pod). */
export function parseFetchSummary(text: string, policy: PackagePolicy): FetchSummary {
  const r = FetchSummarySchema.safeParse(parseJson(text, 'summary'));
  if (!r.success) throw new PackageError('The fetcher returned a summary this gateway cannot read.', 'Try again; if it persists, report it.', 'failed');
  const big = r.data.packages.find((p) => p.bytes > policy.maxPackageBytes);
  if (big)
    throw new PackageError(
      `${cutUnits(big.file, 200)} is ${big.bytes} bytes; the largest package allowed is ${policy.maxPackageBytes} bytes.`,
      'Ask for a smaller package.',
      'refused',
    );
  if (r.data.unpackedBytes > policy.maxTotalBytes)
    throw new PackageError(
      `The packages take ${r.data.unpackedBytes} bytes unpacked; one install may deliver at most ${policy.maxTotalBytes}.`,
      'Install fewer packages at a time.',
      'refused',
    );
  if (r.data.archiveBytes > policy.maxTotalBytes)
    throw new PackageError(
      `The packages take ${r.data.archiveBytes} bytes; one install may deliver at most ${policy.maxTotalBytes}.`,
      'Install fewer packages at a time.',
      'refused',
    );
  return r.data;
}
