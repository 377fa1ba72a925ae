// File operations in a session's /workspace, one exec each with a fixed script: the path is an
// argument (already checked by workspacePath), file content travels on stdin/stdout as raw bytes.
// In the pod the script resolves symlinks and refuses anything that lands outside /workspace.
import type { Exec } from '@kubernetes/client-node';
import { execRaw } from '../exec/exec.js';
import { SANDBOX_CONTAINER } from '../sandbox/pod.js';

// Shared prologue: $1 is the path; resolve it (following symlinks) and insist on /workspace.
const RESOLVE = (mode: '-e' | '-m'): string => `
p="$1"
r="$(realpath ${mode} -- "$p" 2>/dev/null)" || { echo "no such file or directory: $p" >&2; exit 2; }
case "$r" in /workspace|/workspace/*) ;; *) echo "$p resolves to $r, outside /workspace (symlinks may not leave it)" >&2; exit 3;; esac
`;

export const READ_SCRIPT = `${RESOLVE('-e')}
[ -f "$r" ] || { echo "not a regular file: $p" >&2; exit 4; }
size=$(stat -c %s -- "$r")
[ "$size" -le "$2" ] || { echo "the file is $size bytes; the limit is $2 bytes" >&2; exit 5; }
exec cat -- "$r"
`;

export const WRITE_SCRIPT = `${RESOLVE('-m')}
[ -d "$r" ] && { echo "$p is a directory" >&2; exit 4; }
mkdir -p -- "$(dirname -- "$r")" || exit 6
t="$r.codemode-$$"
cat > "$t" && mv -f -- "$t" "$r" || { rm -f -- "$t"; echo "could not write $p" >&2; exit 7; }
stat -c %s -- "$r"
`;

export const LIST_SCRIPT = `${RESOLVE('-e')}
[ -d "$r" ] || { echo "not a directory: $p" >&2; exit 4; }
cd -- "$r" && find . -mindepth 1 -maxdepth 1 -printf '%y\\t%s\\t%f\\n' | LC_ALL=C sort -t '	' -k3 | head -n "$2"
`;

export interface FileEntry {
  name: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
}

export class FileOpError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FileOpError';
  }
}

function fail(op: string, r: { exitCode?: number; stderr: string; error?: string }): never {
  const why = r.stderr.trim() || r.error || `exit code ${String(r.exitCode)}`;
  throw new FileOpError(`${op} failed: ${why}.`);
}

export async function readFileInPod(exec: Exec, ns: string, pod: string, path: string, maxBytes: number): Promise<Buffer> {
  const r = await execRaw(exec, ns, pod, SANDBOX_CONTAINER, ['sh', '-c', READ_SCRIPT, 'read', path, String(maxBytes)], undefined, maxBytes + 1);
  if (r.exitCode !== 0) fail('read_file', r);
  return r.stdout;
}

export async function writeFileInPod(exec: Exec, ns: string, pod: string, path: string, content: Buffer): Promise<number> {
  const r = await execRaw(exec, ns, pod, SANDBOX_CONTAINER, ['sh', '-c', WRITE_SCRIPT, 'write', path], content, 64);
  if (r.exitCode !== 0) fail('write_file', r);
  return Number(r.stdout.toString().trim());
}

const TYPES: Record<string, FileEntry['type']> = { f: 'file', d: 'directory', l: 'symlink' };

export async function listFilesInPod(exec: Exec, ns: string, pod: string, path: string, maxEntries: number): Promise<{ entries: FileEntry[]; truncated: boolean }> {
  const r = await execRaw(exec, ns, pod, SANDBOX_CONTAINER, ['sh', '-c', LIST_SCRIPT, 'list', path, String(maxEntries + 1)], undefined, 4 * 1024 * 1024);
  if (r.exitCode !== 0) fail('list_files', r);
  const entries = r.stdout
    .toString('utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((line) => {
      const [t = '', size = '0', ...rest] = line.split('\t');
      return { name: rest.join('\t'), type: TYPES[t] ?? 'other', size: Number(size) };
    });
  return { entries: entries.slice(0, maxEntries), truncated: entries.length > maxEntries };
}
