// The session tools that can take long (create_session starts a pod, install_packages downloads)
// keep a client that sent a progress token informed: a heartbeat without a message while they
// work, through a real MCP client against the real gateway. The SessionService is an in-test
// implementation of its interface (the Kubernetes-backed one is tested end to end).
import { afterEach, describe, expect, it } from 'vitest';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import type { GatewayDeps } from '../../../src/gateway/types.js';
import { sleep, startGateway, type Gateway } from './harness.js';

const WORK_MS = 2_300;
const info = { name: 's1', language: 'python' as const, phase: 'Ready', idleTimeoutSeconds: 600, runCount: 0 };

/** Sessions whose create and install take WORK_MS, as a pod start or a download would. */
const slowSessions: NonNullable<GatewayDeps['sessions']> = {
  create: async () => {
    await sleep(WORK_MS);
    return info;
  },
  installPackages: async () => {
    await sleep(WORK_MS);
    return { session: 's1', ecosystem: 'pypi', installed: [], bytes: 0 };
  },
  list: () => [info],
  close: async () => true,
  readFile: async () => Buffer.alloc(0),
  writeFile: async () => 0,
  listFiles: async () => ({ entries: [], truncated: false, unreadableNames: 0 }),
};

let gateway: Gateway | undefined;
afterEach(async () => {
  await gateway?.close();
});

describe.each([
  ['create_session', { language: 'python' }],
  ['install_packages', { session: 's1', packages: ['tabulate'] }],
] as const)('%s', (tool, args) => {
  it.each([
    // [heartbeat seconds, progress token sent, heartbeats expected at least / at most]: 2 on time,
    // 1 when a busy machine delays the first one past the middle of the work.
    [1, true, 1, 3],
    [0, true, 0, 0],
    [1, false, 0, 0],
  ] as const)('heartbeat %i s, progress token %s: %i to %i notifications without a message', async (heartbeat, token, least, most) => {
    gateway = await startGateway({ progressHeartbeatSeconds: heartbeat }, undefined, { sessions: slowSessions });
    const client = new Client({ name: 't', version: '1' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(new StreamableHTTPClientTransport(gateway.url));
    const beats: Array<{ progress: number; message?: string }> = [];
    try {
      const r = await client.callTool({ name: tool, arguments: args }, token ? { onprogress: (p) => beats.push(p) } : {});
      expect(r.isError ?? false).toBe(false);
    } finally {
      await client.close();
    }
    expect(beats.length).toBeGreaterThanOrEqual(least);
    expect(beats.length).toBeLessThanOrEqual(most);
    expect(beats.every((b) => b.message === undefined)).toBe(true);
    expect(beats.map((b) => b.progress)).toEqual(beats.map((_, i) => i + 1));
  });
});

// Every tool that takes a session refuses a name create_session could not have returned before
// anything is looked up, with a fixed sentence: a made-up name of any size is not echoed back.
describe('the session argument', () => {
  const looked: string[] = [];
  const sessions: NonNullable<GatewayDeps['sessions']> = {
    ...slowSessions,
    close: async (name) => (looked.push(name), false),
    readFile: async (name) => (looked.push(name), Buffer.alloc(0)),
    writeFile: async (name) => (looked.push(name), 0),
    listFiles: async (name) => (looked.push(name), { entries: [], truncated: false, unreadableNames: 0 }),
    installPackages: async (name) => (looked.push(name), { session: name, ecosystem: 'pypi', installed: [], bytes: 0 }),
  };
  it.each([
    ['read_file', { path: 'a.txt' }],
    ['write_file', { path: 'a.txt', content: 'x' }],
    ['list_files', {}],
    ['close_session', {}],
    ['install_packages', { packages: ['tabulate'] }],
    ['execute_code', { code: 'print(1)' }],
  ] as const)('%s: a long or malformed name is refused without being echoed', async (tool, args) => {
    gateway = await startGateway({}, undefined, { sessions });
    const client = new Client({ name: 't', version: '1' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
    await client.connect(new StreamableHTTPClientTransport(gateway.url));
    try {
      for (const session of ['x'.repeat(100_000), 'Not_A_Name', '']) {
        const r = await client.callTool({ name: tool, arguments: { ...args, session } });
        const text = JSON.stringify(r);
        expect(r.isError, text.slice(0, 300)).toBe(true);
        expect(text).toMatch(/session must be a session name returned by create_session/);
        expect(text.length).toBeLessThan(2_000);
      }
      expect(looked).toEqual([]);
    } finally {
      await client.close();
    }
  });
});
