// execute_code's code-mode surface (issue 11): the `servers` argument, the paragraph of its
// description that explains the in-sandbox API, and the nested-call counts in its result. The
// description never lists upstream tools: the program discovers them with search() and describe().
import { z } from 'zod';
import type { CallSummary } from '../../codemode/broker.js';
import { SERVER_NAME } from '../../codemode/frames.js';

export const MAX_SERVERS_PER_CALL = 50;

export const ServersArg = z
  .array(z.string().max(63).regex(SERVER_NAME, { error: 'each server must be an upstream server name (from servers() in the sandbox).' }))
  .max(MAX_SERVERS_PER_CALL)
  .optional()
  .describe('Upstream MCP servers this program may call. Default: every server you may use.');

/** The SandboxProfile of a fresh sandbox (execute_code) or a session (create_session). */
export const ProfileArg = z
  .string()
  .max(40)
  .regex(/^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$/, { error: 'profile must be a sandbox profile name such as datascience.' })
  .optional()
  .describe(
    'Kind of sandbox, e.g. datascience (NumPy, pandas, Matplotlib preinstalled). Default: the standard one. An unknown name is answered with the list.',
  );

export function codeModeDescription(limits: { maxCalls: number; callTimeoutSeconds: number }): string {
  return (
    '\n\nCode mode: the program can call the MCP tools of upstream servers through the gateway (the sandbox itself stays offline), ' +
    'in sessions and in fresh sandboxes alike. ' +
    'Python: `from codemode import mcp, call_tool, search, describe, servers, ToolError`. ' +
    '`servers()` lists the servers; `search("create issue", limit=5)` ranks tools by name and description and returns signatures; ' +
    '`describe("github", "create_issue")` gives the full input schema (detail="name"|"summary"|"full"). ' +
    'Call with keyword arguments: `mcp.github.create_issue(title="x")`, or `call_tool("github", "create_issue", {"title": "x"})`; ' +
    'arguments are checked against the schema first, and `_` in a name also matches `-`. ' +
    'In code that uses `await`, await every call (asyncio.gather runs several at once); elsewhere calls return the result directly. ' +
    "Node: `const { mcp, search } = require('codemode')`, always awaited, one object of arguments: `await mcp.github.create_issue({ title: 'x' })`. " +
    'A result is the structuredContent, else JSON parsed from the text, else the text; images stay objects. ' +
    'Large results are cut to the same shape (an object gets a "_cut" key first). ' +
    'Every failure raises ToolError with .kind: tool (the tool failed; its message), denied, limit, timeout, invalid or unavailable. ' +
    'Bash: `python3 -m codemode search QUERY | describe SERVER [TOOL] | call SERVER TOOL key=value ...` prints JSON. ' +
    `Per execution at most ${limits.maxCalls} tool calls of at most ${limits.callTimeoutSeconds} s each; waiting on tools counts against timeout_seconds. ` +
    'Filter and combine results in the program and print only what you need; variables keep results across calls.'
  );
}

export const ToolCallsOutput = z
  .object({
    calls: z.int().min(0).describe('Tool calls the code made (refused ones included).'),
    errors: z.int().min(0).describe('Calls that raised ToolError.'),
    upstream_wait_ms: z.int().min(0).describe('Wall time during which at least one call waited on an upstream (part of duration_ms).'),
    servers: z
      .record(z.string(), z.object({ calls: z.int().min(0), errors: z.int().min(0) }))
      .describe('Per upstream server; "(denied)" counts calls to servers the program may not use.'),
  })
  .optional()
  .describe('Nested tool calls of this execution (code mode), when it made any.');

export function toolCallsOutput(s: CallSummary | undefined): z.infer<typeof ToolCallsOutput> {
  return s && { calls: s.calls, errors: s.errors, upstream_wait_ms: s.upstreamWaitMs, servers: s.servers };
}
