// execute_code's code-mode surface: the servers argument and the description of the in-sandbox
// API appear only when upstream servers are configured, and the description lists no tools.
import { afterEach, describe, expect, it } from 'vitest';
import { connectClient, outcome, startGateway, textOf, type Gateway, type TestClient } from './harness.js';

let gateway: Gateway | undefined;
let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  await gateway?.close();
});

async function listed(codeMode?: { maxCalls: number; callTimeoutSeconds: number }): Promise<{ description: string; properties: Record<string, unknown> }> {
  gateway = await startGateway({}, undefined, codeMode ? { codeMode } : {});
  client = await connectClient('v2 (2026-07-28)', gateway.url);
  const tool = (await client.listTools()).tools[0] as unknown as { description: string; inputSchema: { properties: Record<string, unknown> } };
  return { description: tool.description, properties: tool.inputSchema.properties };
}

describe('execute_code in code mode', () => {
  it('offers neither servers nor the codemode API without upstreams', async () => {
    const t = await listed();
    expect(t.properties).not.toHaveProperty('servers');
    expect(t.description).not.toContain('codemode');
  });

  it('explains the API with the per-run limits, in a few hundred tokens', async () => {
    const t = await listed({ maxCalls: 7, callTimeoutSeconds: 9 });
    expect(t.properties.servers).toMatchObject({ type: 'array', items: { type: 'string' } });
    expect(t.description).toContain('from codemode import mcp, call_tool, search, describe, servers, ToolError');
    expect(t.description).toContain('at most 7 tool calls of at most 9 s each');
    expect(t.description.length).toBeLessThan(3000);
  });

  it.each([
    [['github', 'everything'], false],
    [['GitHub'], true],
    [['a b'], true],
  ])('servers %j: refused %s', async (servers, refused) => {
    gateway = await startGateway({}, undefined, { codeMode: { maxCalls: 1, callTimeoutSeconds: 1 } });
    gateway.service.behaviour = async () => outcome({ stdout: 'ran' });
    client = await connectClient('v2 (2026-07-28)', gateway.url);
    const r = await client.callTool({ code: 'print(1)', servers });
    expect(r.isError ?? false).toBe(refused);
    if (refused) expect(textOf(r)).toMatch(/server/);
    else expect(gateway.service.calls.at(-1)?.request.servers).toEqual(servers);
  });
});
