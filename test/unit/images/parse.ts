// Reads both descriptions of our images — the Dockerfiles and the project's own builder
// (test/cluster/images/build.sh) — into the same shape, so a test can compare what matters.

export interface ImageSpec {
  /** Debian suite of the final stage / the debootstrap. */
  suite: string;
  /** Debian packages installed on top of the base, sorted. */
  packages: string[];
  user: string;
  workdir: string;
  env: string[];
  entrypoint: string[];
  cmd: string[];
}

export interface Dockerfile {
  args: Record<string, string>;
  /** FROM image of each stage, ARGs substituted, in order. */
  stages: Array<{ image: string; name?: string }>;
  final: ImageSpec;
}

/** Instructions with continuations joined and comments dropped (as Docker reads them). */
export function instructions(text: string): Array<{ op: string; rest: string }> {
  const lines = text.split('\n').filter((l) => !/^\s*#/.test(l));
  return lines
    .join('\n')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .map((l) => {
      const m = /^(\S+)\s*(.*)$/.exec(l) as RegExpExecArray;
      return { op: (m[1] ?? '').toUpperCase(), rest: m[2] ?? '' };
    });
}

function substitute(s: string, vars: Record<string, string>): string {
  return s.replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a: string | undefined, b: string | undefined) => vars[a ?? b ?? ''] ?? '');
}

/** Packages after `apt-get install`, up to the end of that command. */
export function aptPackages(run: string): string[] {
  const out: string[] = [];
  for (const m of run.matchAll(/apt-get install([^&;|]*)/g)) {
    out.push(
      ...(m[1] ?? '')
        .trim()
        .split(/\s+/)
        .filter((t) => t !== '' && !t.startsWith('-')),
    );
  }
  return out;
}

export function parseDockerfile(text: string): Dockerfile {
  const args: Record<string, string> = {};
  const stages: Dockerfile['stages'] = [];
  let spec: ImageSpec = { suite: '', packages: [], user: 'root', workdir: '/', env: [], entrypoint: [], cmd: [] };
  for (const { op, rest } of instructions(text)) {
    if (op === 'ARG') {
      const [k, v] = rest.split('=', 2);
      if (k && v !== undefined && !(k in args)) args[k] = v;
    } else if (op === 'FROM') {
      const [image = '', , name] = substitute(rest, args).split(/\s+/);
      stages.push({ image, ...(name !== undefined && { name }) });
      const suite = /^debian:([a-z]+)/.exec(image)?.[1] ?? '';
      spec = { suite, packages: [], user: 'root', workdir: '/', env: [], entrypoint: [], cmd: [] };
    } else if (op === 'RUN') spec.packages.push(...aptPackages(rest));
    else if (op === 'USER') spec.user = rest;
    else if (op === 'WORKDIR') spec.workdir = rest;
    else if (op === 'ENV') spec.env.push(rest);
    else if (op === 'ENTRYPOINT') spec.entrypoint = JSON.parse(rest) as string[];
    else if (op === 'CMD') spec.cmd = JSON.parse(rest) as string[];
  }
  spec.packages.sort();
  return { args, stages, final: spec };
}

/** `NAME=value` or `NAME=(a b c)` assignments at the top level of a bash script. */
export function shellAssignments(script: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const m of script.matchAll(/^([A-Z_]+)=(?:\(([^)]*)\)|"([^"$]*)"|([^\s"$]+))\s*(?:#.*)?$/gm)) {
    const [, name = '', list, quoted, bare] = m;
    out[name] = list !== undefined ? list.trim().split(/\s+/) : (quoted ?? bare ?? '');
  }
  return out;
}

/** The builder's description of image NAME: its suite, package list and OCI config. */
/** `packagesOf`: whose package list the image's rootfs is (datascience: the sandbox's). */
export function parseBuilder(
  script: string,
  name: 'sandbox' | 'gateway' | 'datascience',
  packagesOf: 'sandbox' | 'gateway' = name === 'datascience' ? 'sandbox' : name,
): ImageSpec {
  const vars = shellAssignments(script);
  const call = new RegExp(`write_image ${name} \\S+ "\\$rootfs" "\\$key" \\\\\\n\\s*'(.*)'\\s*\\\\?\\n`, 'm').exec(script);
  if (!call?.[1]) throw new Error(`build.sh has no write_image call for ${name}`);
  const json = call[1].replaceAll(`'"$PATH_ENV"'`, String(vars.PATH_ENV));
  const config = JSON.parse(json) as { User: string; WorkingDir: string; Env: string[]; Entrypoint?: string[]; Cmd?: string[] };
  const packages = vars[`${packagesOf.toUpperCase()}_PACKAGES`];
  if (!Array.isArray(packages)) throw new Error(`build.sh has no ${packagesOf.toUpperCase()}_PACKAGES list`);
  return {
    suite: String(vars.SUITE),
    packages: [...packages].sort(),
    user: config.User,
    workdir: config.WorkingDir,
    env: config.Env,
    entrypoint: config.Entrypoint ?? [],
    cmd: config.Cmd ?? [],
  };
}
