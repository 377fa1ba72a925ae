// Paths for the file tools: everything lives under /workspace. Checked twice — here, purely, for
// `..` and absolute paths elsewhere; and in the pod, after resolving symlinks (see files.ts).
import { posix } from 'node:path';

export const WORKSPACE = '/workspace';

export class PathError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PathError';
  }
}

/** Resolves a user path to an absolute path inside /workspace, or throws PathError. */
export function workspacePath(input: string): string {
  if (input.includes('\0')) throw new PathError('The path contains a NUL character; use a plain file name.');
  const trimmed = input.trim();
  if (trimmed === '') throw new PathError('The path is empty; give a path relative to /workspace, e.g. data.csv.');
  if (trimmed.split('/').includes('..')) {
    throw new PathError(`"${input}" contains "..": paths must stay inside ${WORKSPACE}; use a path relative to it.`);
  }
  const abs = trimmed.startsWith('/') ? posix.normalize(trimmed) : posix.normalize(posix.join(WORKSPACE, trimmed));
  const clean = abs.length > 1 ? abs.replace(/\/+$/, '') : abs;
  if (clean !== WORKSPACE && !clean.startsWith(`${WORKSPACE}/`)) {
    throw new PathError(`"${input}" is outside ${WORKSPACE}; only files in ${WORKSPACE} can be read or written.`);
  }
  return clean;
}
