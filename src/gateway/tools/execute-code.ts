// The execute_code tool: validates the agent's request, hands it to the RunService (which records
// it as a SandboxRun and waits for the result), streams output as progress notifications and turns
// the outcome into a compact text result plus structuredContent.
import { z } from 'zod';
import type { CallToolResult, ServerContext } from '@modelcontextprotocol/server';
import type { Logger } from 'pino';
import { LanguageSchema, MAX_STDIN_BYTES, Reasons } from '../../api/v1alpha1/index.js';
import { RunRequestError } from '../../limits/refusal.js';
import { AdmissionError } from '../../limits/admission.js';
import type { RunOutcome } from '../../runs/types.js';
import { parseQuantity } from '../../config/quantity.js';
import { isRefusal } from '../../profiles/catalog.js';
import type { ResolvedProfile } from '../../profiles/profile.js';
import type { SessionWaitCause } from '../../sessions/service.js';
import { holdOf } from '../body-budget.js';
import { callerOf } from '../caller.js';
import type { ToolRegistry } from '../server.js';
import type { GatewayDeps, GatewayOptions } from '../types.js';
import { isApiUnavailable } from '../../util/network-error.js';
import { ProfileArg, ServersArg, ToolCallsOutput, codeModeDescription, toolCallsOutput } from './code-mode.js';
import { DisplayOutput, displayContent, displaySummary } from './display-content.js';
import { progressReporter } from './progress.js';
import { holdResult } from './result-hold.js';
import { SessionArg } from './session-arg.js';

export const EXECUTE_CODE_TOOL = 'execute_code';

export const ExecuteCodeOutputSchema = z.object({
  run: z.string().optional().describe('Name of the SandboxRun that recorded this execution (absent for session calls).'),
  session: z.string().optional().describe('The session the code ran in, when one was given.'),
  result: z.string().optional().describe('In a session: repr of the value of the last expression, if any.'),
  namespace: z.string().describe('Namespace of the SandboxRun.'),
  phase: z.enum(['Succeeded', 'Failed', 'TimedOut']).describe('Final phase of the run.'),
  exit_code: z.int().optional().describe('Exit code of the program, when it exited on its own.'),
  stdout: z.string().optional().describe('Standard output; omitted when empty.'),
  stderr: z.string().optional().describe('Standard error; omitted when empty.'),
  truncated: z.boolean().describe('True when stdout or stderr was cut at the output cap.'),
  duration_ms: z.int().min(0).optional().describe('Wall-clock duration of the execution.'),
  reason: z.string().optional().describe('Machine-readable reason when the run did not succeed.'),
  message: z.string().optional().describe('What went wrong and what to do, when the run did not succeed.'),
  tool_calls: ToolCallsOutput,
  display: DisplayOutput,
});
export type ExecuteCodeOutput = z.infer<typeof ExecuteCodeOutputSchema>;

function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

// The JSON Schema gets maxLength (characters) so clients see the bound; the byte check catches
// multi-byte text under that length. Both report the same sentence with the actual size.
function sizedText(field: string, maxBytes: number, hint: string): z.ZodString {
  const tooLarge = (input: unknown): string => `${field} is ${utf8Bytes(String(input))} bytes (UTF-8); the limit is ${maxBytes} bytes. ${hint}`;
  return z
    .string()
    .max(maxBytes, { error: (issue) => tooLarge(issue.input), abort: true })
    .refine((text) => utf8Bytes(text) <= maxBytes, { error: (issue) => tooLarge(issue.input) });
}

function inputSchema(options: GatewayOptions) {
  return baseInput(options).extend({ servers: ServersArg });
}

function baseInput(options: GatewayOptions) {
  return z.object({
    code: sizedText('code', options.maxCodeBytes, 'Send a shorter program, or generate bulky data inside the code.')
      .min(1, { error: 'code is empty; send the program text to run.' })
      .describe(`Complete program to run, at most ${options.maxCodeBytes} bytes (UTF-8).`),
    language: LanguageSchema.optional().describe(
      "Language of the code: python, bash, sh, node or javascript (same as node). Default: python, or the session's language when session is given.",
    ),
    timeout_seconds: z
      .int()
      .min(1)
      .max(options.maxTimeoutSeconds, {
        error: `timeout_seconds must be at most ${options.maxTimeoutSeconds}; split the work into shorter runs.`,
      })
      .optional()
      .describe(`Wall-clock limit in seconds (1-${options.maxTimeoutSeconds}); default ${options.defaultTimeoutSeconds}.`),
    stdin: sizedText('stdin', MAX_STDIN_BYTES, 'Send less input, or embed generated data in the code.')
      .optional()
      .describe(`Data fed to the program's standard input, at most ${MAX_STDIN_BYTES} bytes.`),
    session: SessionArg.optional().describe(
      'Run in this session (from create_session): variables, imports and files persist between calls, which run one at a time (a call waits while another runs). The language must match the session; without it the code runs in a fresh sandbox.',
    ),
    profile: ProfileArg,
  });
}

const DESCRIPTION =
  'Run a program in a fresh, isolated sandbox with no network access and return its stdout, ' +
  'stderr and exit code. A non-zero exit code is a normal result, not a tool error. Print what ' +
  'you need to see; nothing persists between calls unless you pass a session from create_session. ' +
  'Images the code displays (Matplotlib figures left open or shown, where the image has Matplotlib; display(obj)) come back after the text. ' +
  'Output streams as progress notifications ' +
  'when the client sends a progress token. When the service is at capacity the call waits ' +
  'briefly, then fails with a tool error that says when to retry.';

/** A non-zero exit is the program's answer; only runs that did not finish normally are errors. */
export function isRunError(outcome: RunOutcome): boolean {
  if (outcome.phase === 'TimedOut') return true;
  return outcome.phase === 'Failed' && outcome.reason !== Reasons.NonZeroExit && outcome.reason !== Reasons.Exception;
}

/**
 * The profiles whose sandboxes get more memory than `limit` (the one an OOM-killed sandbox had),
 * as a sentence for the caller: `profile` for a run, create_session's for a session. Empty when
 * none has more or the limit is not known.
 */
export function moreMemoryAdvice(profiles: readonly ResolvedProfile[], limit: string | undefined, session: boolean): string {
  const bytes = (q: string): number | undefined => {
    try {
      return parseQuantity(q);
    } catch {
      return undefined;
    }
  };
  const had = limit === undefined ? undefined : bytes(limit);
  if (had === undefined) return '';
  const more = profiles
    .map((p) => ({ name: p.name, memory: p.shape.defaultMemory, bytes: bytes(p.shape.defaultMemory) ?? 0 }))
    .filter((p) => p.bytes > had)
    .sort((a, b) => a.bytes - b.bytes || a.name.localeCompare(b.name))
    .slice(0, 5);
  if (more.length === 0) return '';
  const list = more.map((p) => `${p.name} (${p.memory})`).join(', ');
  const verb = session ? 'Or create the new session with a profile that has more' : 'Or run it with a profile that has more';
  return ` ${verb}: ${list}.`;
}

/**
 * What the caller is told of an OOM kill, for the text and structuredContent alike. The message's
 * first sentence says whose memory, its limit and which files count against it. A session call's
 * message goes on to say what became of the session; a run's, how to ask for more with
 * resources.memory, a SandboxRun field this tool does not have: the profiles with more memory
 * are named instead.
 */
function outOfMemoryMessage(outcome: RunOutcome, deps: Pick<GatewayDeps, 'profiles'>, profile: string | undefined): string {
  const profiles = deps.profiles;
  if (outcome.session !== undefined) {
    const more = profiles ? moreMemoryAdvice(profiles.all(), outcome.memoryLimit, true) : '';
    return `${outcome.message ?? "The session's interpreter ran out of memory and was killed; the session is lost with its state: create a new session."}${more}`;
  }
  const resolved = profiles?.resolve(profile);
  const limit = resolved && !isRefusal(resolved) ? resolved.shape.defaultMemory : undefined;
  const more = profiles ? moreMemoryAdvice(profiles.all(), limit, false) : '';
  const advice = 'Use less memory: process data in smaller pieces instead of loading it all at once.';
  const diagnosis = outcome.message?.split('. ')[0]?.replace(/\.$/, '');
  return `${diagnosis === undefined ? '' : `${diagnosis}. `}${advice}${more}`;
}

function failureText(outcome: RunOutcome, timeoutSeconds: number, options: GatewayOptions): string {
  if (outcome.phase === 'TimedOut') {
    return `The run exceeded timeout_seconds=${timeoutSeconds}; make the code faster or raise ` + `timeout_seconds (max ${options.maxTimeoutSeconds}).`;
  }
  if (outcome.reason === Reasons.OOMKilled) return `The run was killed because it ran out of memory (OOMKilled). ${outcome.message ?? ''}`.trimEnd();
  const why = outcome.message ?? 'The sandbox could not complete the run; try again.';
  return `The run failed (${outcome.reason ?? 'unknown reason'}). ${why}`;
}

/**
 * The text content of a result. Format (each part omitted when empty):
 *
 *   <failure sentence with a hint>      only when the run did not finish normally
 *   stdout:\n<stdout>
 *   stderr:\n<stderr>
 *   exit code: <n>                      whenever the program exited on its own
 *   (output truncated ...)              when a stream was cut at the cap
 *
 * Parts are separated by a blank line; one trailing newline of each stream is dropped because
 * the separator already ends the line. structuredContent carries the exact streams.
 */
export function formatRunText(outcome: RunOutcome, failure?: string): string {
  const parts: string[] = [];
  if (failure !== undefined) parts.push(failure);
  if (outcome.stdout !== '') parts.push(`stdout:\n${outcome.stdout.replace(/\n$/, '')}`);
  if (outcome.stderr !== '') parts.push(`stderr:\n${outcome.stderr.replace(/\n$/, '')}`);
  if (outcome.result !== undefined) parts.push(`result: ${outcome.result}`);
  if (outcome.exitCode !== undefined) parts.push(`exit code: ${outcome.exitCode}`);
  if (outcome.truncated) parts.push('(output truncated at the output cap; print less or write a summary)');
  return parts.length > 0 ? parts.join('\n\n') : '(no output)';
}

export function toStructured(outcome: RunOutcome): ExecuteCodeOutput {
  return {
    ...(outcome.runName !== '' && { run: outcome.runName }),
    ...(outcome.session !== undefined && { session: outcome.session }),
    ...(outcome.result !== undefined && { result: outcome.result }),
    namespace: outcome.namespace,
    phase: outcome.phase,
    ...(outcome.exitCode !== undefined && { exit_code: outcome.exitCode }),
    ...(outcome.stdout !== '' && { stdout: outcome.stdout }),
    ...(outcome.stderr !== '' && { stderr: outcome.stderr }),
    truncated: outcome.truncated,
    ...(outcome.durationMs !== undefined && { duration_ms: Math.max(0, Math.round(outcome.durationMs)) }),
    ...(outcome.reason !== undefined && { reason: outcome.reason }),
    ...(outcome.message !== undefined && { message: outcome.message }),
    ...(outcome.toolCalls !== undefined && { tool_calls: toolCallsOutput(outcome.toolCalls) }),
    ...(outcome.display?.length && { display: displaySummary(outcome.display) }),
  };
}

function errorResult(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

// Fires when the MCP request is cancelled or the HTTP client goes away. The RunService stops
// waiting but the run itself completes and stays recorded in its SandboxRun.
function callerGone(ctx: ServerContext): AbortSignal {
  const httpSignal = ctx.http?.req?.signal;
  return httpSignal === undefined ? ctx.mcpReq.signal : AbortSignal.any([ctx.mcpReq.signal, httpSignal]);
}

type ExecuteCodeArgs = z.infer<ReturnType<typeof inputSchema>>;

/**
 * The run's lifecycle as an MCP log notification (logger "codemode.run") on this request's own
 * stream, before the result. The SDK honours the level the client asked for (2026-07-28: the
 * request's `io.modelcontextprotocol/logLevel`; none asked, none sent). Names and outcome only:
 * never code or output.
 */
async function logLifecycle(ctx: ServerContext, level: 'info' | 'warning', outcome: RunOutcome, logger: Logger): Promise<void> {
  const where = outcome.session !== undefined ? `session ${outcome.session}` : `SandboxRun ${outcome.namespace}/${outcome.runName}`;
  const data = `${where} finished: ${outcome.phase}${outcome.reason ? ` (${outcome.reason})` : ''}${outcome.durationMs !== undefined ? ` in ${outcome.durationMs} ms` : ''}.`;
  await ctx.mcpReq.log(level, data, 'codemode.run').catch((err: unknown) => logger.debug({ err }, 'Stopped sending a log notification'));
}

/** A call that waits for its session to finish another call, or to start, says so (logger "codemode.run"). */
async function logWait(ctx: ServerContext, session: string, seconds: number, why: SessionWaitCause, logger: Logger): Promise<void> {
  const data =
    why === 'busy'
      ? `Session ${session} is running another call; this call waits for its turn (at most ${seconds} s).`
      : `Session ${session} is still starting; this call waits for it (at most ${seconds} s).`;
  await ctx.mcpReq.log('info', data, 'codemode.run').catch((err: unknown) => logger.debug({ err }, 'Stopped sending a log notification'));
}

async function executeCode(deps: GatewayDeps, args: ExecuteCodeArgs, ctx: ServerContext): Promise<CallToolResult> {
  const { options } = deps;
  const logger = deps.logger.child({ tool: EXECUTE_CODE_TOOL, requestId: ctx.mcpReq.id, language: args.language });
  const timeoutSeconds = args.timeout_seconds ?? options.defaultTimeoutSeconds;
  const signal = callerGone(ctx);
  const owner = callerOf(ctx);
  const refused = await deps.sandboxGate?.refusal(signal);
  if (refused !== undefined) {
    logger.warn('Refused run: the sandbox self-check does not allow code');
    return errorResult(refused);
  }
  const progress = progressReporter(ctx, options, logger);
  try {
    const outcome = await deps.runService.execute(
      {
        // Without a language a session call runs in the session's; a fresh sandbox runs python.
        ...((args.language !== undefined || args.session === undefined) && { language: args.language ?? 'python' }),
        code: args.code,
        timeoutSeconds,
        ...(args.stdin !== undefined && { stdin: args.stdin }),
        ...(args.session !== undefined && { session: args.session }),
        ...(owner && { owner }),
        ...(args.servers !== undefined && { servers: args.servers }),
        ...(args.profile !== undefined && { profile: args.profile }),
      },
      {
        signal,
        ...(progress !== undefined && { onOutput: (chunk) => progress.push(chunk) }),
        ...(args.session !== undefined && { onWait: (seconds, why) => void logWait(ctx, args.session ?? '', seconds, why, logger) }),
      },
    );
    // Everything streamed must reach the client before the result closes the response.
    await progress?.close();
    logger.info(
      {
        run: outcome.runName,
        namespace: outcome.namespace,
        phase: outcome.phase,
        reason: outcome.reason,
        clientGone: signal.aborted,
      },
      'Completed run',
    );
    // An OOM kill's message is the caller's (outOfMemoryMessage), in the text and structuredContent alike.
    const told = outcome.reason === Reasons.OOMKilled ? { ...outcome, message: outOfMemoryMessage(outcome, deps, args.profile) } : outcome;
    const failure = isRunError(told) ? failureText(told, timeoutSeconds, options) : undefined;
    await logLifecycle(ctx, outcome.phase === 'Succeeded' ? 'info' : 'warning', outcome, logger);
    // The result is the caller's to hold until it has been sent (result-hold.ts): its images only
    // as far as the caller's share has room for them.
    const sent = holdResult(told, holdOf(ctx.http?.req));
    return {
      content: [{ type: 'text', text: formatRunText(sent, failure) }, ...displayContent(sent.display)],
      structuredContent: toStructured(sent),
      ...(failure !== undefined && { isError: true }),
    };
  } catch (err) {
    await progress?.close();
    if (err instanceof AdmissionError) {
      // Over capacity: which limit, how full and when to retry are in the message and hint.
      logger.info({ limit: err.limit, retryAfterSeconds: err.retryAfterSeconds }, 'Refused run for capacity');
      return errorResult(`${err.message}\n${err.hint}`);
    }
    if (err instanceof RunRequestError) {
      // A session call's refusal can quote its kernel (the sandbox's text): not for the logs.
      logger.info(err.quotesSandbox ? { sessionCall: true } : { reason: err.message }, 'Refused run request');
      return errorResult(`${err.message}\n${err.hint}`);
    }
    if (signal.aborted) {
      logger.info('Stopped waiting for run: the client went away; the run continues');
      return errorResult('The request was cancelled; the run continues and is recorded in its SandboxRun.');
    }
    if (isApiUnavailable(err)) {
      logger.warn({ err }, 'Failed to execute run: the Kubernetes API server was unavailable');
      return errorResult(
        'The operator could not reach the Kubernetes API server (unreachable or unavailable). If the run was started it is recorded in its SandboxRun; ' +
          'otherwise nothing ran. Try again in a moment; if it keeps failing, ask the administrator to check the cluster.',
      );
    }
    logger.error({ err }, 'Failed to execute run');
    return errorResult(
      'The run could not be executed because of an internal error in codemode-operator. Try again; ' +
        'if it keeps failing, ask the administrator to check the operator logs.',
    );
  }
}

export function registerExecuteCode(server: ToolRegistry, deps: GatewayDeps): void {
  server.registerTool(
    EXECUTE_CODE_TOOL,
    {
      title: 'Execute code',
      description: deps.codeMode ? DESCRIPTION + codeModeDescription(deps.codeMode) : DESCRIPTION,
      // Without upstream servers there is nothing to name: the argument is not offered.
      inputSchema: deps.codeMode ? inputSchema(deps.options) : baseInput(deps.options),
      outputSchema: ExecuteCodeOutputSchema,
      annotations: {
        title: 'Execute code',
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: false,
        // The sandbox has no network: a run cannot reach anything outside it.
        openWorldHint: false,
      },
    },
    (args, ctx) => executeCode(deps, args, ctx),
  );
}
