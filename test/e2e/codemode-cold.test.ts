// Code mode in cold transient runs: with no warm pool, a run gets a pod of its own started with the
// kernel (its exec stream carries the calls), unless its image is not python's (then the plain
// runner). Against the REAL reference "everything" MCP server.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Watch, type V1Pod } from '@kubernetes/client-node';
import { createNamespace, deleteNamespace, testKube } from './helpers/kube.js';
import { startEverything, type Everything } from './helpers/everything.js';
import { connect, startOperator, type RunningOperator, type TestClient, type ToolResult } from './helpers/operator.js';

const k = testKube();
let ns = '';
let op: RunningOperator;
let mcp: TestClient;
let everything: Everything;
/** Every run pod's main command, as the API showed it (the pods are deleted after their runs). */
const commands = new Map<string, string>();
let stopWatch: (() => void) | undefined;

beforeAll(async () => {
  ns = await createNamespace(k, 'codemode-cold');
  everything = await startEverything();
  // Bash runs get another image (the data-science one): the kernel runs in python's image only.
  op = await startOperator(ns, { CODEMODE_WARM_POOL_SIZE: '0', CODEMODE_IMAGE_BASH: 'codemode.local/datascience:v1' }, { upstreams: everything.caller });
  mcp = await connect(op.url, 'current');
  const seen = (pod: V1Pod): void => {
    const name = pod.metadata?.name ?? '';
    if (name.startsWith('sbr-')) commands.set(name, (pod.spec?.containers[0]?.command ?? []).join(' '));
  };
  const req = await new Watch(k.kc).watch(
    `/api/v1/namespaces/${ns}/pods`,
    {},
    (_type: string, pod: V1Pod) => seen(pod),
    () => undefined,
  );
  stopWatch = () => req.abort();
});
afterAll(async () => {
  stopWatch?.();
  await mcp?.close();
  await op?.stop();
  await everything?.stop();
  await deleteNamespace(k, ns);
});

const sc = (r: ToolResult): Record<string, unknown> => r.structuredContent ?? {};
const podOf = (r: ToolResult): string => `sbr-${String(sc(r).run)}`;

describe('code mode in cold runs (no warm pool)', () => {
  it.each([
    [
      'python',
      'import socket\nfrom codemode import mcp\nprint(socket.gethostname().startswith("sbr-"), mcp.everything.echo(message="cold"))',
      'True Echo: cold\n',
    ],
    [
      'node',
      "const os = require('node:os');\nconst { mcp } = require('codemode');\n(async () => console.log(os.hostname().startsWith('sbr-'), await mcp.everything.echo({ message: 'cold' })))();",
      'true Echo: cold\n',
    ],
  ])('a %s run calls a tool from a cold pod started with a kernel', async (language, code, stdout) => {
    const r = await mcp.callTool('execute_code', { code, language, timeout_seconds: 60 });
    expect(sc(r).phase, JSON.stringify(r.content)).toBe('Succeeded');
    expect(sc(r).stdout).toBe(stdout);
    expect(sc(r).tool_calls).toMatchObject({ calls: 1, errors: 0, servers: { everything: { calls: 1, errors: 0 } } });
    expect(commands.get(podOf(r))).toMatch(/kernel\.py/);
  });

  it("keeps the runner where the run's image is not python's (no kernel there), and says codemode is missing", async () => {
    const r = await mcp.callTool('execute_code', { code: 'echo $((6 * 7)); python3 -m codemode servers', language: 'bash', timeout_seconds: 60 });
    expect(sc(r).stdout, JSON.stringify(r.content)).toBe('42\n');
    expect(String(sc(r).stderr)).toMatch(/No module named codemode/);
    expect(commands.get(podOf(r))).not.toMatch(/kernel/);
    expect(commands.has(podOf(r))).toBe(true);
  });
});
