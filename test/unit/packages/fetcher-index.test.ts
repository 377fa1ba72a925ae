// The fetcher's `prepare` (it fetches pip itself from the index) run here against real HTTP servers
// on 127.0.0.1 standing in for a private index that wants credentials: they come from the index
// URL (`https://user:password@host/...`, CODEMODE_PACKAGES_PYPI_INDEX_URL) as an Authorization
// header to that host only, never to where it redirects, and never in what the fetcher prints
// (which reaches the caller, the session's status and its Events).
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rootCertificates } from 'node:tls';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { withIndex } from '../../../src/packages/installer.js';
import { FETCHER_SCRIPT } from '../../../src/packages/scripts.js';

const SECRET = 'S3cr3t-t0ken';
const AUTH = `Basic ${Buffer.from(`alice:${SECRET}`).toString('base64')}`;
const WHEEL = Buffer.from('not really a wheel, but these bytes have the sha256 asked for');
const DIGEST = createHash('sha256').update(WHEEL).digest('hex');

let w: string;
let servers: Server[];
/** Every request each server saw: its path and headers. */
let seen: { index: { url: string; headers: IncomingHttpHeaders }[]; cdn: { url: string; headers: IncomingHttpHeaders }[] };

async function listen(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const s = createServer(handler);
  servers.push(s);
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  return `127.0.0.1:${String((s.address() as AddressInfo).port)}`;
}

/** An index that answers only with alice's credentials; its pip file is its own or the CDN's (a redirect). */
async function start(offers: 'own' | 'redirect' | 'nothing'): Promise<string> {
  const cdn = await listen((req, res) => {
    seen.cdn.push({ url: req.url ?? '', headers: req.headers });
    res.end(WHEEL);
  });
  return listen((req, res) => {
    seen.index.push({ url: req.url ?? '', headers: req.headers });
    if (req.headers.authorization !== AUTH) return res.writeHead(401).end();
    if (req.url === '/simple/pip/') {
      const files = offers === 'nothing' ? [] : [{ filename: 'pip-1-py3-none-any.whl', url: offers === 'own' ? '../../files/pip.whl' : '/moved/pip.whl' }];
      return res.writeHead(200, { 'content-type': 'application/vnd.pypi.simple.v1+json' }).end(JSON.stringify({ files }));
    }
    if (req.url === '/files/pip.whl') return res.end(WHEEL);
    if (req.url === '/moved/pip.whl') return res.writeHead(302, { location: `http://${cdn}/pip.whl` }).end();
    res.writeHead(404).end();
  });
}

function prepare(index: string): Promise<{ code: number | null; err: string }> {
  const script = FETCHER_SCRIPT.replace('W = "/tmp/fetch"', `W = ${JSON.stringify(w)}`);
  const child = spawn('python3', ['-I', '-c', script, 'prepare', 'pypi', 'pip-1-py3-none-any.whl', DIGEST], { timeout: 20_000 });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  child.stdin.end(withIndex(index, Buffer.from(rootCertificates.join('\n'))));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, err })));
}

beforeEach(() => {
  w = mkdtempSync(join(tmpdir(), 'fetch-'));
  servers = [];
  seen = { index: [], cdn: [] };
});
afterEach(async () => {
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  rmSync(w, { recursive: true, force: true });
});

describe("the fetcher's prepare with a private index's credentials in its URL", () => {
  it('sends them to the index for its page and its own files', async () => {
    const host = await start('own');
    const r = await prepare(`http://alice:${SECRET}@${host}/simple`);
    expect(r.code, r.err).toBe(0);
    expect(readFileSync(join(w, 'pip.whl'))).toEqual(WHEEL);
    expect(seen.index.map((s) => [s.url, s.headers.authorization])).toEqual([
      ['/simple/pip/', AUTH],
      ['/files/pip.whl', AUTH],
    ]);
  });

  it('does not send them on to where the index redirects', async () => {
    const host = await start('redirect');
    const r = await prepare(`http://alice:${SECRET}@${host}/simple`);
    expect(r.code, r.err).toBe(0);
    expect(seen.index.map((s) => s.headers.authorization)).toEqual([AUTH, AUTH]);
    expect(seen.cdn).toHaveLength(1);
    expect(seen.cdn[0]?.headers.authorization).toBeUndefined();
  });

  it.each<[string, (host: string) => string, RegExp]>([
    [
      'an index that does not offer pip',
      (host) => `http://alice:${SECRET}@${host}/simple`,
      /the index at http:\/\/127\.0\.0\.1:\d+\/simple does not offer pip/,
    ],
    ['wrong credentials', (host) => `http://alice:wrong-${SECRET}@${host}/simple`, /could not fetch http:\/\/127\.0\.0\.1:\d+\/simple\/pip\/: HTTP Error 401/],
    ['an index that does not answer', () => `http://alice:${SECRET}@127.0.0.1:9/simple`, /could not fetch http:\/\/127\.0\.0\.1:9\/simple\/pip\/: .*refused/],
  ])('never prints them: %s', async (_, index, message) => {
    const host = await start('nothing');
    const r = await prepare(index(host));
    expect(r.code).toBe(3);
    expect(r.err).toMatch(message);
    expect(r.err).not.toContain(SECRET);
    expect(r.err).not.toContain('alice');
  });

  it("takes the index from the first line of its stdin, never from its arguments (an exec's arguments are in the API server's audit log)", async () => {
    const script = FETCHER_SCRIPT.replace('W = "/tmp/fetch"', `W = ${JSON.stringify(w)}`);
    const child = spawn('python3', ['-I', '-c', script, 'prepare', 'pypi', 'pip-1-py3-none-any.whl', DIGEST], { timeout: 20_000 });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.stdin.on('error', () => undefined); // it exits before reading the rest: EPIPE
    child.stdin.end(rootCertificates.join('\n'));
    const code = await new Promise((resolve) => child.on('close', resolve));
    expect(code).toBe(2);
    expect(err).toMatch(/the index URL is missing from the first line of stdin/);
  });
});
