// create_session, list_sessions, close_session: persistent interpreters for multi-step work.
import { z } from 'zod';
import { SessionLanguageSchema } from '../../api/v1alpha1/index.js';
import { callerOf } from '../caller.js';
import { ProfileArg } from './code-mode.js';
import type { ToolRegistry } from '../server.js';
import type { GatewayDeps } from '../types.js';
import { errorResult, okResult, toolFailure } from './result.js';

const SessionInfoSchema = z.object({
  session: z.string().describe('Session name; pass it as `session` to execute_code and the file tools.'),
  language: SessionLanguageSchema,
  phase: z.string().describe('Pending, Ready, Lost or Failed.'),
  idle_timeout_seconds: z.int(),
  run_count: z.int(),
  last_activity_time: z.string().optional(),
  expires_at: z.string().optional().describe('When the session is deleted if it stays idle.'),
  message: z.string().optional(),
});

type Info = ReturnType<NonNullable<GatewayDeps['sessions']>['list']>[number];

function toInfo(s: Info): z.infer<typeof SessionInfoSchema> {
  return {
    session: s.name,
    language: s.language,
    phase: s.phase,
    idle_timeout_seconds: s.idleTimeoutSeconds,
    run_count: s.runCount,
    ...(s.lastActivityTime && { last_activity_time: s.lastActivityTime }),
    ...(s.expiresAt && { expires_at: s.expiresAt }),
    ...(s.message && { message: s.message }),
  };
}

export function registerSessionTools(server: ToolRegistry, deps: GatewayDeps): void {
  const sessions = deps.sessions;
  if (!sessions) return;
  const logger = deps.logger.child({ component: 'session-tools' });

  server.registerTool(
    'create_session',
    {
      title: 'Create session',
      description:
        'Start a persistent sandbox whose interpreter keeps variables, imports, functions and /workspace files between execute_code calls. No network. Deleted after idle_timeout_seconds without a call; close it with close_session when done.',
      inputSchema: z.object({
        language: SessionLanguageSchema.default('python').describe('python (default), bash, node or javascript.'),
        idle_timeout_seconds: z.int().min(10).max(86400).optional().describe('Seconds without a call before the session is deleted (default 600).'),
        profile: ProfileArg,
      }),
      outputSchema: SessionInfoSchema,
      annotations: { title: 'Create session', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    async (args, ctx) => {
      const refused = await deps.sandboxGate?.refusal(ctx.mcpReq.signal);
      if (refused !== undefined) return errorResult(refused);
      try {
        const info = toInfo(await sessions.create(args.language, args.idle_timeout_seconds, ctx.mcpReq.signal, callerOf(ctx), args.profile));
        return okResult(
          `Session ${info.session} (${info.language}) is ready. Pass session="${info.session}" to execute_code, read_file, write_file and list_files.`,
          info,
        );
      } catch (err) {
        return toolFailure(err, logger, 'create_session');
      }
    },
  );

  server.registerTool(
    'list_sessions',
    {
      title: 'List sessions',
      description: 'List the sessions on this server with their language, state, call count and expiry.',
      inputSchema: z.object({}),
      outputSchema: z.object({ sessions: z.array(SessionInfoSchema) }),
      annotations: { title: 'List sessions', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    },
    (_args, ctx) => {
      const list = sessions.list(callerOf(ctx)).map(toInfo);
      const text =
        list.length === 0
          ? 'No sessions. Create one with create_session.'
          : list.map((s) => `${s.session}\t${s.language}\t${s.phase}\truns=${s.run_count}\texpires=${s.expires_at ?? '-'}`).join('\n');
      return okResult(text, { sessions: list });
    },
  );

  server.registerTool(
    'close_session',
    {
      title: 'Close session',
      description: 'Delete a session, its interpreter state and its /workspace files.',
      inputSchema: z.object({ session: z.string().min(1).describe('Session name from create_session.') }),
      outputSchema: z.object({ session: z.string(), closed: z.boolean() }),
      annotations: { title: 'Close session', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    },
    async (args, ctx) => {
      try {
        const closed = await sessions.close(args.session, callerOf(ctx));
        return okResult(closed ? `Closed session ${args.session}.` : `There was no session ${args.session} (already closed or collected).`, {
          session: args.session,
          closed,
        });
      } catch (err) {
        return toolFailure(err, logger, 'close_session');
      }
    },
  );
}
