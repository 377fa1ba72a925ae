// Finds runtime/ (the session kernels) next to the code, in a checkout (src/ or dist/src/) and
// in the gateway image (/app/runtime), and reads the files the runtime ConfigMap carries.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export function findRuntimeDir(start = dirname(fileURLToPath(import.meta.url))): string | undefined {
  for (let dir = start; ; dir = dirname(dir)) {
    const candidate = join(dir, 'runtime');
    if (existsSync(join(candidate, 'python', 'kernel.py'))) return candidate;
    if (dirname(dir) === dir) return undefined;
  }
}

/** Kernel sources by path relative to runtime/ (only .py and .js files; docs and tests stay out). */
export function readRuntimeFiles(dir: string): Record<string, string> {
  const files: Record<string, string> = {};
  const walk = (d: string): void => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (/\.(py|js)$/.test(name)) files[relative(dir, p)] = readFileSync(p, 'utf8');
    }
  };
  walk(dir);
  return files;
}
