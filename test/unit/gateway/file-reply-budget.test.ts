// What one user's read_file calls may hold of the replica every caller shares: the file's bytes
// while it is read and its reply (the content twice, as JSON) until it is sent come out of the
// same per-user and per-replica budget as request bodies (body-budget.ts). Before, nothing bounded
// them: one user's concurrent reads of 8 MiB files held ~20 MiB each, as many as the user sent,
// enough to end a 512 MiB replica with every other user's calls. Over real HTTP with two token
// users and a session service of plain files.
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOKENS_KEY, TokensAuthenticator } from '../../../src/auth/tokens.js';
import { startGateway, type Gateway } from './harness.js';

const ALICE = 'tok-alice-aaaaaaaaaaaaaaaa';
const BOB = 'tok-bob-bbbbbbbbbbbbbbbbbbbb';
const MiB = 1024 * 1024;
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };

interface Answer {
  isError: boolean;
  text: string;
}

describe('read_file replies count against the body budget', () => {
  let gateway: Gateway;
  let release: () => void = () => undefined;
  let gate = Promise.resolve();
  /** Reads that reached the session service (and wait at the gate). */
  let arrived = 0;
  const rejections: string[] = [];
  // The file of each path: its size in bytes.
  const sizes: Record<string, number> = { 'small.txt': 1000, 'big.txt': 1 * MiB };

  beforeAll(async () => {
    const tokens = new TokensAuthenticator(pino({ level: 'silent' }));
    tokens.load({ data: { [TOKENS_KEY]: Buffer.from(`${ALICE},alice,1\n${BOB},bob,2\n`).toString('base64') } });
    const sessions = {
      readFile: async (_session: string, path: string): Promise<Buffer> => {
        arrived++;
        await gate;
        return Buffer.alloc(sizes[path] ?? 0, 0x61);
      },
    };
    gateway = await startGateway(
      { maxFileBytes: 1 * MiB },
      { authenticator: tokens },
      {
        sessions: sessions as never,
        bodyBudget: { perUserBytes: 4.5 * MiB, totalBytes: 7.5 * MiB },
        onAdmissionRejected: (limit) => void rejections.push(limit),
      },
    );
    gateway.setReady(true);
  });
  afterAll(async () => {
    await gateway.close();
  });

  const read = async (token: string, path: string): Promise<Answer> => {
    const res = await fetch(gateway.url, {
      method: 'POST',
      headers: { ...HEADERS, authorization: `Bearer ${token}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'read_file', arguments: { session: 's', path } } }),
    });
    const text = await res.text();
    const data = text.startsWith('event:') ? text.slice(text.indexOf('data: ') + 6) : text;
    const r = (JSON.parse(data) as { result: { isError?: boolean; content: Array<{ text: string }> } }).result;
    return { isError: r.isError ?? false, text: r.content[0]?.text ?? '' };
  };

  /** Sends `reads` (token, path) at once while the pod does not answer, then lets it answer. */
  async function atOnce(reads: Array<[string, string]>): Promise<Answer[]> {
    gate = new Promise<void>((r) => (release = r));
    arrived = 0;
    const answers = reads.map(([token, path]) => read(token, path));
    // Every read has reached the tool (and taken its share, or been refused) before the files
    // come back: counted, not waited for (a fixed wait was too short on a busy machine).
    for (let i = 0; arrived + rejections.length < reads.length; i++) {
      if (i > 2000) throw new Error(`only ${arrived} reads arrived and ${rejections.length} were refused of ${reads.length}`);
      await new Promise((r) => setTimeout(r, 5));
    }
    release();
    return Promise.all(answers);
  }

  it.each<[string, Array<[string, string]>, string[]]>([
    [
      'reads within the share are all served',
      [
        [ALICE, 'small.txt'],
        [ALICE, 'small.txt'],
        [ALICE, 'small.txt'],
        [ALICE, 'small.txt'],
      ],
      ['ok', 'ok', 'ok', 'ok'],
    ],
    [
      "one user's reads beyond the share (the largest file each while it is read) are refused; another user's are served",
      [
        [ALICE, 'small.txt'],
        [ALICE, 'small.txt'],
        [ALICE, 'small.txt'],
        [ALICE, 'small.txt'],
        [ALICE, 'small.txt'],
        [ALICE, 'small.txt'],
        [BOB, 'small.txt'],
      ],
      ['ok', 'ok', 'ok', 'ok', 'user', 'user', 'ok'],
    ],
    [
      'a reply larger than what is left of the share is refused once the file is read',
      [
        [ALICE, 'big.txt'],
        [ALICE, 'small.txt'],
        [ALICE, 'small.txt'],
      ],
      ['user', 'ok', 'ok'],
    ],
    [
      "the replica's total is shared: past it, any user's read is refused",
      [
        [ALICE, 'small.txt'],
        [ALICE, 'small.txt'],
        [ALICE, 'small.txt'],
        [ALICE, 'small.txt'],
        [BOB, 'small.txt'],
        [BOB, 'small.txt'],
        [BOB, 'small.txt'],
        [BOB, 'small.txt'],
      ],
      ['ok', 'ok', 'ok', 'ok', 'ok', 'ok', 'ok', 'total'],
    ],
  ])('%s', async (_name, reads, expected) => {
    rejections.length = 0;
    const answers = await atOnce(reads);
    const got = answers.map((a) => (!a.isError ? 'ok' : /the most one user may/.test(a.text) ? 'user' : /its limit/.test(a.text) ? 'total' : a.text));
    expect(got.sort()).toEqual([...expected].sort());
    expect(rejections.sort()).toEqual(
      expected
        .filter((e) => e !== 'ok')
        .map((e) => (e === 'user' ? 'user_request_bytes' : 'request_bytes'))
        .sort(),
    );
    // Everything is given back once the responses have ended: the same reads are served again, one at a time.
    for (const [token, path] of reads.filter(([, p]) => p === 'small.txt').slice(0, 2)) expect((await read(token, path)).isError).toBe(false);
  });
});
