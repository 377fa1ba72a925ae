// File operations in a session's /workspace, one exec each of a fixed program: the path is an
// argument (already checked by workspacePath), file content travels on stdin/stdout as raw bytes.
// In the pod the program resolves the path from a descriptor of /workspace, component by
// component with O_NOFOLLOW, so a symlink swapped in by user code cannot lead outside
// (files-script.ts).
import type { Exec } from '@kubernetes/client-node';
import { execRaw } from '../exec/exec.js';
import { SANDBOX_CONTAINER } from '../sandbox/pod.js';
import { FILE_OPS_SCRIPT } from './files-script.js';

/** The exec command of one file operation: isolated python (-I: no cwd on sys.path, no env). */
export function fileOpCommand(op: 'read' | 'write' | 'list', path: string, arg?: string): string[] {
  return ['python3', '-I', '-S', '-c', FILE_OPS_SCRIPT, op, path, ...(arg === undefined ? [] : [arg])];
}

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
  const r = await execRaw(exec, ns, pod, SANDBOX_CONTAINER, fileOpCommand('read', path, String(maxBytes)), undefined, maxBytes + 1);
  if (r.exitCode !== 0) fail('read_file', r);
  return r.stdout;
}

export async function writeFileInPod(exec: Exec, ns: string, pod: string, path: string, content: Buffer): Promise<number> {
  const r = await execRaw(exec, ns, pod, SANDBOX_CONTAINER, fileOpCommand('write', path), content, 64);
  if (r.exitCode !== 0) fail('write_file', r);
  return Number(r.stdout.toString().trim());
}

const TYPES: Record<string, FileEntry['type']> = { f: 'file', d: 'directory', l: 'symlink' };

export async function listFilesInPod(
  exec: Exec,
  ns: string,
  pod: string,
  path: string,
  maxEntries: number,
): Promise<{ entries: FileEntry[]; truncated: boolean }> {
  const r = await execRaw(exec, ns, pod, SANDBOX_CONTAINER, fileOpCommand('list', path, String(maxEntries + 1)), undefined, 4 * 1024 * 1024);
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
