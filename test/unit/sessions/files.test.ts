// The gateway's side of the file tools: what it makes of the helper's stdout. Code in the session
// names files freely and can write straight into the helper's stdout (/proc/<pid>/fd/1: same uid,
// same pid namespace), so every byte here is crafted the way hostile session code could craft it.
// The Exec below only plays back bytes and an exit status, as client-node's Exec delivers them.
import type { Exec } from '@kubernetes/client-node';
import type { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { FileOpError, listFilesInPod, readFileInPod, writeFileInPod } from '../../../src/sessions/files.js';

const CHUNK = 65_536;

function playback(stdout: Buffer, exit = 0): { exec: Exec; commands: string[][] } {
  const commands: string[][] = [];
  const exec = {
    exec(_ns: string, _pod: string, _c: string, cmd: string[], out: Writable, _err: Writable, _in: unknown, _tty: boolean, cb: (s: unknown) => void) {
      commands.push(cmd);
      setImmediate(() => {
        for (let i = 0; i < stdout.length; i += CHUNK) out.write(stdout.subarray(i, i + CHUNK));
        cb(
          exit === 0
            ? { status: 'Success' }
            : { status: 'Failure', reason: 'NonZeroExitCode', details: { causes: [{ reason: 'ExitCode', message: String(exit) }] } },
        );
      });
      return Promise.resolve({ readyState: 3, on() {}, close() {} });
    },
  };
  return { exec: exec as unknown as Exec, commands };
}

/** One record as the helper prints it: type, size and name, each ended by NUL. */
const rec = (t: string, size: string | number, name: string | Buffer): Buffer =>
  Buffer.concat([Buffer.from(`${t}\0${size}\0`), Buffer.from(name), Buffer.from([0])]);
const listing = (...records: Buffer[]): Buffer => Buffer.concat(records);
const list = (stdout: Buffer, maxEntries = 1000) => listFilesInPod(playback(stdout).exec, 'ns', 'pod', '/workspace', maxEntries);

describe('list_files', () => {
  it.each<[string, Buffer, object]>([
    ['an empty directory', Buffer.alloc(0), { entries: [], truncated: false, unreadableNames: 0 }],
    [
      'every type',
      listing(rec('d', 4096, 'data'), rec('f', 5, 'a.txt'), rec('l', 7, 'link'), rec('o', 0, 'fifo')),
      {
        entries: [
          { name: 'data', type: 'directory', size: 4096 },
          { name: 'a.txt', type: 'file', size: 5 },
          { name: 'link', type: 'symlink', size: 7 },
          { name: 'fifo', type: 'other', size: 0 },
        ],
        truncated: false,
      },
    ],
    [
      'a name built to forge a record of the old line format',
      listing(rec('f', 1, 'x\nf\tNaN\tforged'), rec('f', 2, 'real')),
      {
        entries: [
          { name: 'x\nf\tNaN\tforged', type: 'file', size: 1 },
          { name: 'real', type: 'file', size: 2 },
        ],
      },
    ],
    [
      'a name of newlines that would push real files past the limit',
      listing(rec('f', 0, '\n'.repeat(250) + 'x'), rec('f', 3, 'real')),
      {
        entries: [
          { name: '\n'.repeat(250) + 'x', type: 'file', size: 0 },
          { name: 'real', type: 'file', size: 3 },
        ],
        truncated: false,
      },
    ],
    ['the largest exact size', listing(rec('f', Number.MAX_SAFE_INTEGER, 'big')), { entries: [{ name: 'big', type: 'file', size: Number.MAX_SAFE_INTEGER }] }],
    [
      'names that are not UTF-8: left out and counted (no tool could address them)',
      listing(rec('f', 3, Buffer.from([0xff])), rec('f', 3, Buffer.from([0xfe])), rec('f', 2, 'ok'), rec('f', 1, Buffer.from('caf\xe9', 'latin1'))),
      { entries: [{ name: 'ok', type: 'file', size: 2 }], unreadableNames: 3 },
    ],
  ])('%s', async (_, stdout, want) => {
    expect(await list(stdout)).toMatchObject(want);
  });

  it('asks for one entry more than it shows and says the list is truncated when it comes', async () => {
    const { exec, commands } = playback(listing(rec('f', 1, 'a'), rec('f', 1, 'b'), rec('f', 1, 'c')));
    expect(await listFilesInPod(exec, 'ns', 'pod', '/workspace', 2)).toEqual({
      entries: [
        { name: 'a', type: 'file', size: 1 },
        { name: 'b', type: 'file', size: 1 },
      ],
      truncated: true,
      unreadableNames: 0,
    });
    expect(commands[0]!.slice(-3)).toEqual(['list', '/workspace', '3']);
  });

  const maxName = 'n'.repeat(255);
  it.each<[string, Buffer, number, RegExp]>([
    ['the old line format', Buffer.from('f\t5\ta.txt\nd\t4096\tsub\n'), 1000, /cut short/],
    ['a forged NaN size', listing(rec('f', 'NaN', 'forged')), 1000, /size "NaN" is not a byte count/],
    ['a negative size', listing(rec('f', '-1', 'a')), 1000, /size "-1"/],
    ['a size in exponent form', listing(rec('f', '1e3', 'a')), 1000, /size "1e3"/],
    ['an empty size', listing(rec('f', '', 'a')), 1000, /size "" is not/],
    ['a size past 2^53', listing(rec('f', '9007199254740993', 'a')), 1000, /size "9007199254740993"/],
    ['a size of 20 digits', listing(rec('f', '1'.repeat(20), 'a')), 1000, /size "1{20}"/],
    ['an unknown type', listing(rec('x', 1, 'a')), 1000, /type "x"/],
    ['a type that is an Object key', listing(rec('constructor', 1, 'a')), 1000, /type "constructor"/],
    ['an empty name', listing(rec('f', 1, '')), 1000, /empty name/],
    ['a name with a slash', listing(rec('d', 1, '../../etc')), 1000, /name with "\/"/],
    ['a name that is a dot entry', listing(rec('d', 1, '..')), 1000, /"\.\." is not a directory entry/],
    ['a name longer than a file system allows', listing(rec('f', 1, maxName + 'n')), 1000, /longer than 255 bytes/],
    ['a record cut short', Buffer.concat([listing(rec('f', 1, 'a')), Buffer.from('f\x001\x00b')]), 1000, /record 2 is cut short/],
    ['more records than were asked for', listing(rec('f', 1, 'a'), rec('f', 1, 'b'), rec('f', 1, 'c'), rec('f', 1, 'd')), 2, /more than the 3 entries/],
    ['4 MiB of forged records', Buffer.from('f\x001\x00a\x00'.repeat((4 * 1024 * 1024) / 6)), 1000, /more output than 1001 entries can take/],
    ['4 MiB of forged lines', Buffer.from('f\t1\tforged\n'.repeat((4 * 1024 * 1024) / 11)), 1000, /more output than 1001 entries can take/],
  ])('refuses %s as a listing that could not be read', async (_, stdout, maxEntries, why) => {
    const err = await list(stdout, maxEntries).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FileOpError);
    expect((err as Error).message).toMatch(/^list_files failed: the listing from the pod could not be read \(/);
    expect((err as Error).message).toMatch(why);
  });

  it('takes the largest listing the helper can print for the entries asked for', async () => {
    const records = Array.from({ length: 1001 }, (_, i) => rec('f', '9'.repeat(19).slice(0, 15), String(i).padStart(4, '0') + maxName.slice(4)));
    const r = await list(listing(...records));
    expect(r.entries).toHaveLength(1000);
    expect(r.truncated).toBe(true);
  });

  it('stops reading a forged listing at the size the helper can print, not 4 MiB later', async () => {
    const cap = (1000 + 1) * (1 + 1 + 19 + 1 + 255 + 1);
    const { exec } = playback(Buffer.alloc(4 * 1024 * 1024, 'a'));
    const started = performance.now();
    await expect(listFilesInPod(exec, 'ns', 'pod', '/workspace', 1000)).rejects.toThrow(
      new RegExp(`more output than 1001 entries can take \\(${cap} bytes\\)`),
    );
    expect(performance.now() - started).toBeLessThan(1000);
  });
});

describe('write_file', () => {
  const content = Buffer.from('hello');
  it.each<[string, string, number, RegExp | number]>([
    ['the size the helper prints', '5\n', 0, 5],
    ['a forged NaN', 'NaN\n', 0, /did not confirm the 5 bytes/],
    ['a forged larger size', '999\n', 0, /did not confirm the 5 bytes/],
    ['an empty reply', '', 0, /did not confirm the 5 bytes/],
    ['a size followed by more', '5\n5\n', 0, /did not confirm the 5 bytes/],
    ['a failed write', '', 7, /write_file failed: exit code 7/],
  ])('%s', async (_, stdout, exit, want) => {
    const r = writeFileInPod(playback(Buffer.from(stdout), exit).exec, 'ns', 'pod', '/workspace/a', content);
    if (typeof want === 'number') expect(await r).toBe(want);
    else await expect(r).rejects.toThrow(want);
  });
});

describe('read_file', () => {
  it.each<[string, number, RegExp | null]>([
    ['exactly the limit', 10, null],
    ['one byte over the limit', 11, /more than the limit of 10 bytes/],
    ['far over the limit', 100_000, /more than the limit of 10 bytes/],
  ])('%s', async (_, bytes, want) => {
    const r = readFileInPod(playback(Buffer.alloc(bytes, 'x')).exec, 'ns', 'pod', '/workspace/a', 10);
    if (want === null) expect((await r).length).toBe(bytes);
    else {
      const err = await r.catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FileOpError);
      expect((err as Error).message).toMatch(want);
    }
  });
});
