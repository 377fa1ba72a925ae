// Shared shapes of tool results: a failure is a successful MCP result with isError and a
// sentence saying what to do (protocol errors are only for unknown tools or bad sessions).
import type { CallToolResult } from '@modelcontextprotocol/server';
import { RunRequestError } from '../../limits/refusal.js';
import { FileOpError } from '../../sessions/files.js';
import { PathError } from '../../sessions/paths.js';
import { SessionError } from '../../sessions/errors.js';
import type { Logger } from 'pino';

export function errorResult(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

export function okResult(text: string, structuredContent: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text }], structuredContent };
}

/** Known, user-fixable errors become isError results; anything else is logged and generic. */
export function toolFailure(err: unknown, logger: Logger, tool: string): CallToolResult {
  if (err instanceof SessionError || err instanceof RunRequestError) return errorResult(`${err.message}\n${err.hint}`);
  if (err instanceof PathError || err instanceof FileOpError) return errorResult(err.message);
  logger.error({ err, tool }, 'Tool failed');
  return errorResult(
    `${tool} failed because of an internal error in codemode-operator. Try again; if it keeps failing, ask the administrator to check the operator logs.`,
  );
}
