// read_file, write_file, list_files: a session's /workspace. Paths are relative to /workspace (or
// absolute inside it); `..`, paths outside it and symlinks that leave it are refused.
import type { CallToolResult } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { holdOf, type BodyBudgetLimit, type BodyHold } from '../body-budget.js';
import { callerOf } from '../caller.js';
import type { ToolRegistry } from '../server.js';
import type { GatewayDeps } from '../types.js';
import { errorResult, okResult, toolFailure } from './result.js';
import { SessionArg } from './session-arg.js';

const session = SessionArg.describe('Session name from create_session.');

/**
 * A name as the text listing shows it: one line per entry, so a name with a control character
 * (code in the session names its files) is shown quoted and escaped, as JSON writes it. The
 * structured entries carry the names as they are.
 */
export const shownName = (name: string): string => (/[\u0000-\u001f\u007f"]/.test(name) ? JSON.stringify(name) : name);
const path = z.string().min(1).max(4096);

/**
 * A file's bytes as the text read_file returns, or why they are not text. The text goes out twice
 * (the tool's text and its structuredContent) as JSON, which writes a control character as a
 * six-byte \u escape: a file of them came back twelve times its size (the largest file allowed,
 * 8 MiB, as a 100 MB reply serialized in one go). A file whose JSON would be more than twice its
 * bytes is refused as not text (base64 is 4/3). A leading byte-order mark is the file's: kept.
 */
export function fileText(bytes: Uint8Array): { text: string } | { problem: string } {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return { problem: 'is not valid UTF-8 text' };
  }
  let escapes = 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i] as number;
    // \b \t \n \f \r, " and \ take one byte more; other control characters five (\u0001).
    if (b < 0x20) escapes += b === 0x08 || b === 0x09 || b === 0x0a || b === 0x0c || b === 0x0d ? 1 : 5;
    else if (b === 0x22 || b === 0x5c) escapes += 1;
  }
  if (escapes > bytes.length)
    return { problem: `is not text (mostly control characters: its ${bytes.length} bytes would be ${bytes.length + escapes} as JSON)` };
  return { text };
}
const encoding = z.enum(['utf8', 'base64']).default('utf8');

/** Why a read_file was refused: its user's (or the replica's) share of memory is held by other calls. */
export function fileReplyRefused(limit: BodyBudgetLimit, hold: BodyHold): string {
  const mib = (n: number): string => `${Math.round(n / (1024 * 1024))} MiB`;
  return limit === 'user'
    ? `Too many requests: your calls in flight on this gateway replica (request bodies, and files being read or sent back) already hold ${mib(hold.limits.perUserBytes)}, the most one user may. The file was not returned. Wait for some of your calls to finish, then retry; read large files one at a time.`
    : `The gateway replica is holding ${mib(hold.limits.totalBytes)} of request bodies and file replies for its callers, its limit. The file was not returned. Retry in a few seconds.`;
}

export function registerFileTools(server: ToolRegistry, deps: GatewayDeps): void {
  const sessions = deps.sessions;
  if (!sessions) return;
  const logger = deps.logger.child({ component: 'file-tools' });

  server.registerTool(
    'read_file',
    {
      title: 'Read file',
      description: "Read a file from a session's /workspace. encoding=base64 for binary files.",
      inputSchema: z.object({
        session,
        path: path.describe('Path relative to /workspace, e.g. results/out.csv.'),
        encoding: encoding.describe('utf8 (default) or base64.'),
      }),
      outputSchema: z.object({ path: z.string(), encoding: z.enum(['utf8', 'base64']), size: z.int(), content: z.string() }),
      annotations: { title: 'Read file', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async (args, ctx) => {
      // Held of the caller's share until the response has ended (body-budget.ts): the file's bytes
      // while it is read (at most the largest file), then its reply, the content twice as JSON.
      const hold = holdOf(ctx.http?.req);
      const refused = (limit: BodyBudgetLimit, h: BodyHold): CallToolResult => {
        deps.onAdmissionRejected?.(limit === 'user' ? 'user_request_bytes' : 'request_bytes');
        return errorResult(fileReplyRefused(limit, h));
      };
      const reading = hold?.take(deps.options.maxFileBytes ?? 0);
      if (hold && reading) return refused(reading, hold);
      try {
        const bytes = await sessions.readFile(args.session, args.path, callerOf(ctx));
        let content: string;
        if (args.encoding === 'base64') content = bytes.toString('base64');
        else {
          const t = fileText(bytes);
          if ('problem' in t) return errorResult(`${args.path} ${t.problem}; read it with encoding="base64".`);
          content = t.text;
        }
        const reply = hold?.take(2 * Buffer.byteLength(content, 'utf8'));
        if (hold && reply) return refused(reply, hold);
        return okResult(content, { path: args.path, encoding: args.encoding, size: bytes.length, content });
      } catch (err) {
        return toolFailure(err, logger, 'read_file');
      }
    },
  );

  server.registerTool(
    'write_file',
    {
      title: 'Write file',
      description: "Create or replace a file in a session's /workspace (parent directories are created). encoding=base64 for binary content.",
      inputSchema: z.object({
        session,
        path: path.describe('Path relative to /workspace.'),
        content: z.string().describe('File content, as text or base64.'),
        encoding: encoding.describe('utf8 (default) or base64.'),
      }),
      outputSchema: z.object({ path: z.string(), size: z.int() }),
      annotations: { title: 'Write file', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    async (args, ctx) => {
      if (args.encoding === 'base64' && !/^[A-Za-z0-9+/]*={0,2}$/.test(args.content.replace(/\s+/g, ''))) {
        return errorResult('content is not valid base64; send base64 text, or use encoding="utf8" for plain text.');
      }
      try {
        const bytes = args.encoding === 'base64' ? Buffer.from(args.content, 'base64') : Buffer.from(args.content, 'utf8');
        const size = await sessions.writeFile(args.session, args.path, bytes, callerOf(ctx));
        return okResult(`Wrote ${size} bytes to ${args.path}.`, { path: args.path, size });
      } catch (err) {
        return toolFailure(err, logger, 'write_file');
      }
    },
  );

  server.registerTool(
    'list_files',
    {
      title: 'List files',
      description: "List a directory of a session's /workspace (default: /workspace itself).",
      inputSchema: z.object({ session, path: path.default('.').describe('Directory relative to /workspace; default ".".') }),
      outputSchema: z.object({
        path: z.string(),
        entries: z.array(z.object({ name: z.string(), type: z.enum(['file', 'directory', 'symlink', 'other']), size: z.int() })),
        truncated: z.boolean(),
      }),
      annotations: { title: 'List files', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    async (args, ctx) => {
      try {
        const { entries, truncated, unreadableNames } = await sessions.listFiles(args.session, args.path, callerOf(ctx));
        const lines = entries.map((e) => `${shownName(e.type === 'directory' ? `${e.name}/` : e.name)}\t${e.size}`);
        if (truncated) lines.push('(first 1000 entries)');
        if (unreadableNames > 0) lines.push(`(${unreadableNames} entries whose names are not UTF-8 are not shown; list them with execute_code)`);
        const text = lines.length === 0 ? '(empty directory)' : lines.join('\n');
        return okResult(text, { path: args.path, entries, truncated });
      } catch (err) {
        return toolFailure(err, logger, 'list_files');
      }
    },
  );
}
