// The canary's report (runtime/selfcheck/canary.py): one JSON line written from INSIDE a sandbox,
// so untrusted input like everything else that leaves a pod — size-bounded, schema-checked, and
// a bad report is a failed check run, never an exception that escapes.
import { z } from 'zod';

/** Largest report accepted; the real one is well under 4 KiB. */
export const MAX_REPORT_BYTES = 64 * 1024;

const text = (max: number) => z.string().max(max);

const CgroupValueSchema = z.object({ path: text(128), value: text(64) }).nullable();

const NetworkTargetNameSchema = z.enum(['api_server', 'gateway', 'pod_ip', 'dns', 'metadata']);
export type NetworkTargetName = z.infer<typeof NetworkTargetNameSchema>;

const ProbeSchema = z.object({
  name: NetworkTargetNameSchema,
  address: text(300),
  proto: z.enum(['tls', 'http', 'echo', 'dns']),
  outcome: z.enum(['reply', 'no_reply']),
  detail: text(200),
});
export type Probe = z.infer<typeof ProbeSchema>;

const RootProbeSchema = z.object({ readonly_mount: z.boolean().nullable(), write: text(64) });

export const CanaryReportSchema = z.object({
  v: z.literal(1),
  uid: z.int(),
  pids_max: CgroupValueSchema,
  memory_limit: CgroupValueSchema,
  fork_probe: z.object({ attempted: z.int().min(0), failed_after: z.int().min(0).nullable(), error: text(64).nullable() }),
  root: z.object({ '/': RootProbeSchema, '/usr': RootProbeSchema }),
  service_account_token: z.boolean(),
  network: z.array(ProbeSchema).max(32),
});
export type CanaryReport = z.infer<typeof CanaryReportSchema>;

export type ParsedReport = { ok: true; report: CanaryReport } | { ok: false; problem: string };

/**
 * The report is the last non-empty line of stdout (a sandbox image's python might print a
 * warning first). Problems are described without quoting the pod's output.
 */
export function parseCanaryReport(stdout: string): ParsedReport {
  if (Buffer.byteLength(stdout, 'utf8') > MAX_REPORT_BYTES) return { ok: false, problem: `the report is larger than ${MAX_REPORT_BYTES} bytes` };
  const line = stdout.trimEnd().split('\n').pop()?.trim() ?? '';
  if (line === '') return { ok: false, problem: 'the canary printed no report' };
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch {
    return { ok: false, problem: 'the report is not valid JSON' };
  }
  const parsed = CanaryReportSchema.safeParse(json);
  if (!parsed.success) {
    const where = parsed.error.issues[0]?.path.join('.') || '(top level)';
    return { ok: false, problem: `the report does not match its schema (at ${where})` };
  }
  return { ok: true, report: parsed.data };
}

/** A cgroup value as bytes/count; undefined for `max`, missing or malformed values. */
export function cgroupNumber(v: { value: string } | null): number | undefined {
  if (v === null || !/^[0-9]{1,20}$/.test(v.value)) return undefined;
  const n = Number(v.value);
  return Number.isSafeInteger(n) ? n : undefined;
}
