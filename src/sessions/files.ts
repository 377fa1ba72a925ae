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
  // The helper stops with exit 5 when a file grows past the limit; more bytes than that did not
  // come from it alone (code in the session can write into its stdout).
  if (!r.overflow && r.exitCode !== 0) fail('read_file', r);
  if (r.overflow || r.stdout.length > maxBytes) {
    throw new FileOpError(
      `read_file failed: the pod sent more than the limit of ${maxBytes} bytes (the file may have changed while it was read). Try again, or read the file from code with execute_code.`,
    );
  }
  return r.stdout;
}

export async function writeFileInPod(exec: Exec, ns: string, pod: string, path: string, content: Buffer): Promise<number> {
  const r = await execRaw(exec, ns, pod, SANDBOX_CONTAINER, fileOpCommand('write', path), content, 64);
  if (!r.overflow && r.exitCode !== 0) fail('write_file', r);
  // The size reported is the one sent; the helper's count of what it read must match it exactly
  // (anything else is a short write or output that is not the helper's).
  if (r.overflow || r.stdout.toString('latin1') !== `${content.length}\n`) {
    throw new FileOpError(`write_file failed: the pod did not confirm the ${content.length} bytes sent. Write the file again; read it back to check it.`);
  }
  return content.length;
}

const TYPES = new Map<string, FileEntry['type']>([
  ['f', 'file'],
  ['d', 'directory'],
  ['l', 'symlink'],
  ['o', 'other'],
]);

// A listing record is type NUL size NUL name NUL. No name can hold a NUL (or "/"), so none can end
// its record early or forge another. Linux names are at most 255 bytes (NAME_MAX) and st_size at
// most 19 digits, which bounds what the genuine helper can print for the entries asked for.
const MAX_NAME_BYTES = 255;
const MAX_RECORD_BYTES = 1 + 1 + 19 + 1 + MAX_NAME_BYTES + 1;

/** The most stdout the helper can print when asked for `records` entries. */
export function listingCap(records: number): number {
  return records * MAX_RECORD_BYTES;
}

export interface Listing {
  entries: FileEntry[];
  truncated: boolean;
  /** Entries left out because their names are not UTF-8 (no tool path could name them). */
  unreadableNames: number;
}

function unreadable(why: string): FileOpError {
  return new FileOpError(
    `list_files failed: the listing from the pod could not be read (${why}). Code in the session may be writing into the file tool's output; try again, or list the directory from code with execute_code.`,
  );
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The name of a record, or undefined when it is not UTF-8; throws when no directory holds it. */
function entryName(raw: Buffer, n: number): string | undefined {
  if (raw.length === 0) throw unreadable(`record ${n} has an empty name`);
  if (raw.length > MAX_NAME_BYTES) throw unreadable(`record ${n} has a name longer than ${MAX_NAME_BYTES} bytes`);
  if (raw.includes(0x2f)) throw unreadable(`record ${n} has a name with "/"`);
  let name: string;
  try {
    name = utf8.decode(raw);
  } catch {
    return undefined;
  }
  if (name === '.' || name === '..') throw unreadable(`record ${n}: "${name}" is not a directory entry`);
  return name;
}

/**
 * Parses what the helper printed for `list`, asked for maxEntries + 1 records (the extra one only
 * says there are more). Every record is checked, and any that the helper could not have printed
 * makes the whole listing unreadable rather than half-trusted.
 */
export function parseListing(out: Buffer, maxEntries: number): Listing {
  const entries: FileEntry[] = [];
  let unreadableNames = 0;
  let records = 0;
  let pos = 0;
  while (pos < out.length) {
    if (records > maxEntries) throw unreadable(`more than the ${maxEntries + 1} entries asked for`);
    const n = ++records;
    const fields: Buffer[] = [];
    for (let i = 0; i < 3; i++) {
      const end = out.indexOf(0, pos);
      if (end < 0) throw unreadable(`record ${n} is cut short`);
      fields.push(out.subarray(pos, end));
      pos = end + 1;
    }
    const [t, s, rawName] = fields as [Buffer, Buffer, Buffer];
    const type = TYPES.get(t.toString('latin1'));
    if (type === undefined) throw unreadable(`record ${n} has type ${JSON.stringify(t.toString('latin1').slice(0, 20))}`);
    const sizeText = s.toString('latin1');
    const size = Number(sizeText);
    if (!/^\d{1,19}$/.test(sizeText) || !Number.isSafeInteger(size)) {
      throw unreadable(`record ${n}: size ${JSON.stringify(sizeText.slice(0, 30))} is not a byte count`);
    }
    const name = entryName(rawName, n);
    if (n > maxEntries) continue;
    if (name === undefined) unreadableNames++;
    else entries.push({ name, type, size });
  }
  return { entries, truncated: records > maxEntries, unreadableNames };
}

export async function listFilesInPod(exec: Exec, ns: string, pod: string, path: string, maxEntries: number): Promise<Listing> {
  const cap = listingCap(maxEntries + 1);
  const r = await execRaw(exec, ns, pod, SANDBOX_CONTAINER, fileOpCommand('list', path, String(maxEntries + 1)), undefined, cap);
  if (r.overflow) throw unreadable(`more output than ${maxEntries + 1} entries can take (${cap} bytes)`);
  if (r.exitCode !== 0) fail('list_files', r);
  return parseListing(r.stdout, maxEntries);
}
