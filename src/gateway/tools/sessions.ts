// create_session, list_sessions, close_session, install_packages: persistent interpreters for multi-step work.
import { z } from 'zod';
import { MAX_PACKAGES, PackageRequirementSchema, SessionLanguageSchema } from '../../api/v1alpha1/index.js';
import { describeInstall } from '../../packages/session-packages.js';
import { callerOf } from '../caller.js';
import { ProfileArg } from './code-mode.js';
import type { ToolRegistry } from '../server.js';
import type { GatewayDeps } from '../types.js';
import { withHeartbeat } from './progress.js';
import { errorResult, okResult, toolFailure } from './result.js';
import { SessionArg } from './session-arg.js';

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

const PackagesArg = z
  .array(PackageRequirementSchema)
  .min(1)
  .max(MAX_PACKAGES)
  .describe(
    `Packages to install (at most ${MAX_PACKAGES}): PyPI requirements in a python session (tabulate, tabulate==0.9.0), npm packages in a node session (is-number, is-number@7.0.0). Downloaded outside the sandbox (which stays offline) within the administrator's allow/deny lists and size limits; wheels only for Python, npm packages without install scripts.`,
  );

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
        idle_timeout_seconds: z
          .int()
          .min(10)
          .max(86400)
          .optional()
          .describe("Seconds without a call before the session is deleted (default 600, or the administrator's maximum when it is lower)."),
        profile: ProfileArg,
        packages: PackagesArg.optional(),
      }),
      outputSchema: SessionInfoSchema,
      annotations: { title: 'Create session', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    async (args, ctx) => {
      const refused = await deps.sandboxGate?.refusal(ctx.mcpReq.signal);
      if (refused !== undefined) return errorResult(refused);
      try {
        // Starting a pod (and installing packages) can take minutes: the heartbeat keeps the call.
        const created = await withHeartbeat(ctx, deps.options, logger, () =>
          sessions.create(args.language, args.idle_timeout_seconds, ctx.mcpReq.signal, callerOf(ctx), args.profile, args.packages),
        );
        const info = toInfo(created);
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
      inputSchema: z.object({ session: SessionArg.describe('Session name from create_session.') }),
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

  server.registerTool(
    'install_packages',
    {
      title: 'Install packages',
      description:
        "Install packages into a session: PyPI packages in a python session, npm packages in a node session. The sandbox stays offline: the server downloads them (the administrator decides what is allowed) and copies them in. They can be imported in the next execute_code call and stay for the session's life.",
      inputSchema: z.object({ session: SessionArg.describe('Session name from create_session.'), packages: PackagesArg }),
      outputSchema: z.object({
        session: z.string(),
        ecosystem: z.enum(['pypi', 'npm']),
        installed: z.array(z.object({ name: z.string(), version: z.string() })).describe('Everything installed, dependencies included.'),
        bytes: z.int().describe('Bytes copied into the session.'),
      }),
      annotations: { title: 'Install packages', readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    },
    async (args, ctx) => {
      try {
        const r = await withHeartbeat(ctx, deps.options, logger, () => sessions.installPackages(args.session, args.packages, callerOf(ctx)));
        const installed = r.installed.map((p) => ({ name: p.name, version: p.version }));
        return okResult(`${describeInstall(r, args.packages)} Session ${r.session}.`, {
          session: r.session,
          ecosystem: r.ecosystem,
          installed,
          bytes: r.bytes,
        });
      } catch (err) {
        return toolFailure(err, logger, 'install_packages');
      }
    },
  );
}
