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

/**
 * Resolves a user path to an absolute path inside /workspace, or throws PathError. A name is taken
 * exactly as given: a file whose name starts or ends with a space or a newline (a program can make
 * one, and list_files shows it) must be readable by that name, so nothing is trimmed.
 */
export function workspacePath(input: string): string {
  if (input.includes('\0')) throw new PathError('The path contains a NUL character; use a plain file name.');
  // A lone UTF-16 surrogate is no character: on its way to the pod (the exec URL) it merged with
  // the next one, so a file was written under another name, or the call failed as "URI malformed".
  if (/\p{Cs}/u.test(input)) throw new PathError('The path is not valid Unicode (it has an unpaired surrogate); use the name as list_files shows it.');
  if (input.trim() === '') throw new PathError('The path is empty; give a path relative to /workspace, e.g. data.csv.');
  if (input.split('/').includes('..')) {
    throw new PathError(`"${input}" contains "..": paths must stay inside ${WORKSPACE}; use a path relative to it.`);
  }
  const abs = input.startsWith('/') ? posix.normalize(input) : posix.normalize(posix.join(WORKSPACE, input));
  const clean = abs.length > 1 ? abs.replace(/\/+$/, '') : abs;
  if (clean !== WORKSPACE && !clean.startsWith(`${WORKSPACE}/`)) {
    throw new PathError(`"${input}" is outside ${WORKSPACE}; only files in ${WORKSPACE} can be read or written.`);
  }
  return clean;
}
