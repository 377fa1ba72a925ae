// The real canary program (runtime/selfcheck/canary.py) run locally with python3, as the operator
// runs it in the pod (program on stdin, targets in argv): its report must parse, and a listener
// that answers must be told apart from one that does not exist.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseCanaryReport, type CanaryReport } from '../../../src/selfcheck/report.js';
import { RUNTIME_DIR } from '../runtime/harness.js';

const program = readFileSync(join(RUNTIME_DIR, 'selfcheck', 'canary.py'));
let server: Server;
let openPort = 0;
let closedPort = 0;

beforeAll(async () => {
  server = createServer((s) => {
    // The canary closes after the first byte back: a reset here is expected.
    s.on('error', () => undefined);
    s.once('data', (b) => s.end(Buffer.concat([Buffer.from('codemode-echo\n'), b])));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  openPort = (server.address() as AddressInfo).port;
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  closedPort = (probe.address() as AddressInfo).port;
  await new Promise((r) => probe.close(r));
});
afterAll(() => new Promise((r) => server.close(r)));

/** Runs the program as the operator does; async, so this process's listener can answer it. */
async function runCanary(arg: string): Promise<{ status: number | null; report: CanaryReport | undefined }> {
  const child = spawn('python3', ['-', arg]);
  child.stdin.end(program);
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  const status = await new Promise<number | null>((r) => child.on('close', r));
  const parsed = parseCanaryReport(out);
  return { status, report: parsed.ok ? parsed.report : undefined };
}

describe('runtime/selfcheck/canary.py', () => {
  it('reports in the schema the operator parses, with bounded forking', async () => {
    const { status, report } = await runCanary(JSON.stringify({ timeout: 0.5, max_processes: 8, targets: [] }));
    expect(status).toBe(0);
    expect(report?.fork_probe.attempted).toBe(8);
    expect(typeof report?.service_account_token).toBe('boolean');
    expect(Object.keys(report?.root ?? {})).toEqual(['/', '/usr']);
  });

  it('tells a listener that answers from one that does not exist', async () => {
    const { report } = await runCanary(
      JSON.stringify({
        timeout: 1,
        max_processes: 1,
        targets: [
          { name: 'pod_ip', host: '127.0.0.1', port: openPort, proto: 'echo' },
          { name: 'gateway', host: '127.0.0.1', port: closedPort, proto: 'http' },
        ],
      }),
    );
    const byName = Object.fromEntries((report?.network ?? []).map((p) => [p.name, p]));
    expect(byName.pod_ip).toMatchObject({ outcome: 'reply', address: `127.0.0.1:${openPort}` });
    expect(byName.gateway).toMatchObject({ outcome: 'no_reply', detail: 'ECONNREFUSED' });
  });

  it('survives arguments it does not understand', async () => {
    const { status, report } = await runCanary('not json');
    expect(status).toBe(0);
    expect(report).toBeDefined();
  });
});
