// Packages a session installs (issue 12): what a SandboxSession asks for (spec.packages) and
// what a SandboxProfile allows (spec.packages). The sandbox never reaches a package index: a
// fetcher pod resolves and downloads, the gateway delivers the files over the exec stream
// (src/packages). Requirements are names with optional versions — never URLs, paths or options,
// which is what the two patterns below enforce (no ':' or '/' outside an npm scope, no leading '-').
import { z } from 'zod';

/** Most requirements one create_session or install_packages call may name. */
export const MAX_PACKAGES = 20;
/** Most requirements spec.packages may hold (install_packages appends what it installed). */
export const MAX_SESSION_PACKAGES = 100;
/** Most allow or deny entries one profile may list. */
export const MAX_POLICY_ENTRIES = 500;

export const ECOSYSTEMS = ['pypi', 'npm'] as const;
export const EcosystemSchema = z.enum(ECOSYSTEMS);
export type Ecosystem = z.infer<typeof EcosystemSchema>;

const PY_OP = '(?:===|==|!=|~=|>=|<=|>|<)';
const PY_VERSION = '[A-Za-z0-9.*+!_-]{1,64}';
/** A PEP 508 name with optional extras and version specifiers (no URLs, no markers). */
export const PYPI_REQUIREMENT = new RegExp(
  `^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?(?:\\[[A-Za-z0-9._,-]{1,100}\\])?(?: ?${PY_OP} ?${PY_VERSION}(?: ?, ?${PY_OP} ?${PY_VERSION}){0,4})?$`,
);
/**
 * An npm name (optionally scoped) with an optional version or range after '@' (no URLs, git or file
 * specs). Capitals are allowed: npm refuses them in new names only, and older packages such as
 * JSONStream keep theirs (a different package from jsonstream).
 */
export const NPM_REQUIREMENT = /^(?:@[a-z0-9][a-z0-9._~-]{0,100}\/)?[A-Za-z0-9][A-Za-z0-9._~-]{0,213}(?:@[A-Za-z0-9.^~<>=|*+ -]{1,64})?$/;

const REQUIREMENT_ERROR =
  'must be a package name with an optional version, e.g. tabulate, tabulate==0.9.0 (python) or is-number@7.0.0 (node); no URLs, paths or options';

/** A regular expression's source as the body of a single-quoted CEL string. */
const celString = (source: string): string => source.replaceAll('\\', '\\\\').replaceAll("'", "\\'");

export const PackageRequirementSchema = z
  .string()
  .min(1)
  .max(200)
  .refine((s) => PYPI_REQUIREMENT.test(s) || NPM_REQUIREMENT.test(s), { error: REQUIREMENT_ERROR })
  // The same patterns in the API server (CEL's RE2 reads them alike): a session it accepted with
  // a requirement this schema refuses would only ever be Failed.
  .meta({
    'x-kubernetes-validations': [
      { rule: `self.matches('${celString(PYPI_REQUIREMENT.source)}') || self.matches('${celString(NPM_REQUIREMENT.source)}')`, message: REQUIREMENT_ERROR },
    ],
  });

export const PackageListSchema = z
  .array(PackageRequirementSchema)
  .max(MAX_SESSION_PACKAGES)
  .describe(
    `Packages installed into the session before it is Ready (at most ${MAX_SESSION_PACKAGES}; install_packages appends what it installs later): PyPI requirements for python sessions (tabulate, tabulate==0.9.0), npm packages for node (is-number, is-number@7.0.0). Fetched outside the sandbox, which stays offline.`,
  );

/** A policy entry: `pypi:<name>`, `pypi:<name>==<version>`, `npm:<name>` or `npm:<name>@<version>`. */
export const POLICY_ENTRY =
  /^(?:pypi:[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?(?:==[A-Za-z0-9.+!_-]{1,64})?|npm:(?:@[a-z0-9][a-z0-9._~-]{0,100}\/)?[A-Za-z0-9][A-Za-z0-9._~-]{0,213}(?:@[A-Za-z0-9.+_-]{1,64})?)$/;

const PolicyEntrySchema = z.string().max(300).regex(POLICY_ENTRY, {
  error: 'must be pypi:<name>, pypi:<name>==<version>, npm:<name> or npm:<name>@<version>',
});

export const PackagePolicySchema = z
  .object({
    ecosystems: z
      .array(EcosystemSchema)
      .max(ECOSYSTEMS.length)
      .optional()
      .describe(
        "Registries sessions of this profile may install from: pypi, npm; [] refuses every install (default: the gateway's CODEMODE_PACKAGES_ECOSYSTEMS).",
      ),
    allow: z
      .array(PolicyEntrySchema)
      .max(MAX_POLICY_ENTRIES)
      .optional()
      .describe(
        "When not empty, only these packages may be installed — dependencies included — e.g. pypi:tabulate, pypi:six==1.17.0, npm:is-number (default: the gateway's CODEMODE_PACKAGES_ALLOW).",
      ),
    deny: z
      .array(PolicyEntrySchema)
      .max(MAX_POLICY_ENTRIES)
      .optional()
      .describe("Packages (or single versions) never installed, dependencies included (default: the gateway's CODEMODE_PACKAGES_DENY)."),
    maxPackageBytes: z
      .int()
      .min(1)
      .max(2 ** 31)
      .optional()
      .describe("Largest single package: a PyPI wheel's size, an npm package's unpacked size (default: the gateway's)."),
    maxTotalBytes: z
      .int()
      .min(1)
      .max(2 ** 33)
      .optional()
      .describe("Most bytes one install delivers into a session, dependencies included (default: the gateway's)."),
  })
  .describe('What sessions of this profile may install (the sandbox stays offline: a fetcher pod downloads, the gateway delivers).');
export type PackagePolicySpec = z.infer<typeof PackagePolicySchema>;
