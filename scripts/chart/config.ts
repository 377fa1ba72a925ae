// The chart's `config:` values, generated from the gateway's own field list (src/config/fields.ts):
// one value per CODEMODE_* variable, its JSON schema, and the one template that maps them to env.
// A field added there reaches values.yaml, values.schema.json, the env template and the README
// values table with `npm run gen:docs`, and `--check` fails until it has.
import { z } from 'zod';
import { FIELDS, type FieldKey } from '../../src/config/fields.js';

/** Settings the chart derives from other values instead of taking them from `config:`. */
export const CHART_OWNED: Partial<Record<FieldKey, { template: string; why: string; inValues: boolean }>> = {
  namespace: { template: 'include "codemode.sandboxNamespace" .', why: 'set from sandboxNamespace', inValues: false },
  allowedHosts: {
    template: 'include "codemode.allowedHosts" .',
    why: 'the Service names and the ingress and route hosts are always added',
    inValues: true,
  },
  stdioGatewayPodLabels: {
    template: 'printf "app.kubernetes.io/name=%s,app.kubernetes.io/instance=%s" (include "codemode.name" .) .Release.Name',
    why: "set to the chart's selector labels",
    inValues: false,
  },
  stdioGatewayNamespace: { template: '.Release.Namespace', why: 'set to the release namespace', inValues: false },
  publicUrl: {
    template: 'include "codemode.publicUrl" .',
    why: "empty: the Ingress's first host, https when it has TLS blocks",
    inValues: true,
  },
};

/**
 * Chart defaults that differ from the gateway's: in a pod it listens on the pod IP, and beyond
 * loopback callers must authenticate (mode none refuses to start there).
 */
export const CHART_DEFAULTS: Partial<Record<FieldKey, string>> = { bindAddress: '0.0.0.0', authMode: 'tokens' };

/**
 * Values the chart's templates read themselves (the container port, the grace period, the RBAC
 * rule for the tokens Secret, the listen address the probes reach): a blank one would render a
 * broken manifest rather than the gateway's default, so the schema refuses it.
 */
export const CHART_READS: Partial<Record<FieldKey, { minimum?: number }>> = {
  port: { minimum: 1 },
  bindAddress: {},
  authTokensSecret: {},
  maxTimeoutSeconds: {},
  podStartupTimeoutSeconds: {},
};

export type ConfigKind = 'string' | 'integer' | 'boolean' | 'list';

export interface ChartConfigField {
  key: string;
  env: string;
  description: string;
  allowed: string;
  kind: ConfigKind;
  /** Default as a YAML value in values.yaml. */
  default: string | number | boolean | string[];
  schema: Record<string, unknown>;
  /** Helm expression for the env value, when not `.Values.config.<key>`. */
  template?: string;
  /** Whether `config.<key>` exists in values (false: the chart sets it from other values). */
  inValues: boolean;
}

/** What a field's parsed value is, from the output side of its zod schema. */
export function kindOf(schema: z.ZodType): ConfigKind {
  const out = z.toJSONSchema(schema, { io: 'output', unrepresentable: 'any' }) as { type?: string };
  if (out.type === 'integer' || out.type === 'number') return 'integer';
  if (out.type === 'array') return 'list';
  if (out.type === 'boolean') return 'boolean';
  return 'string';
}

/**
 * Values accept what the env var accepts, plus the natural YAML form (numbers, lists). A number is
 * checked against the field's own range, so `helm install` refuses what the gateway would refuse
 * at start (as text, e.g. --set-string, only its digits are checked).
 */
export function valueSchema(
  schema: z.ZodType,
  kind: ConfigKind,
  description: string,
  read: { minimum?: number } | undefined = undefined,
): Record<string, unknown> {
  const { $schema: _s, default: _d, ...input } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  // Blank means "the gateway's default" (Helm renders unset values as ""), whatever the kind,
  // except for the values the templates read themselves.
  const blank = read === undefined ? [{ type: 'string', maxLength: 0 }] : [];
  if (kind === 'integer') {
    const out = z.toJSONSchema(schema, { io: 'output', unrepresentable: 'any' }) as { minimum?: number; maximum?: number };
    const minimum = Math.max(read?.minimum ?? 0, out.minimum ?? 0);
    const number = { type: 'integer', minimum, ...(out.maximum !== undefined && { maximum: out.maximum }) };
    return { description, anyOf: [number, input, ...blank] };
  }
  if (kind === 'list') return { description, anyOf: [{ type: 'array', items: { type: 'string' } }, input, ...blank] };
  if (kind === 'boolean') return { description, anyOf: [{ type: 'boolean' }, input, ...blank] };
  if (read !== undefined) return { description, allOf: [input, { type: 'string', minLength: 1 }] };
  return { description, anyOf: [input, ...blank] };
}

function defaultOf(raw: string, kind: ConfigKind): string | number | boolean | string[] {
  if (kind === 'integer' && /^[0-9]+$/.test(raw)) return Number(raw);
  if (kind === 'list') return raw === '' ? [] : raw.split(',');
  if (kind === 'boolean' && (raw === 'true' || raw === 'false')) return raw === 'true';
  return raw;
}

export function chartConfigFields(): ChartConfigField[] {
  return (Object.entries(FIELDS) as Array<[FieldKey, (typeof FIELDS)[FieldKey]]>).map(([key, f]) => {
    const kind = kindOf(f.schema as z.ZodType);
    const owned = CHART_OWNED[key];
    // The raw default, not the docs' wording ("value of CODEMODE_SANDBOX_IMAGE").
    const parsed = (f.schema as z.ZodType).safeParse(undefined);
    const raw = CHART_DEFAULTS[key] ?? (parsed.success && parsed.data !== undefined ? String(parsed.data) : '');
    const description = `\`${f.doc.env}\`: ${f.doc.description}${owned ? ` (${owned.why})` : ''}`;
    return {
      key,
      env: f.doc.env,
      description,
      allowed: f.doc.allowed,
      kind,
      default: defaultOf(raw, kind),
      schema: valueSchema(f.schema as z.ZodType, kind, description, CHART_READS[key]),
      inValues: owned?.inValues ?? true,
      ...(owned && { template: owned.template }),
    };
  });
}

/** The lines between the config markers of values.yaml. */
export function renderConfigValues(fields: ChartConfigField[]): string {
  return fields
    .filter((f) => f.inValues)
    .map((f) => `  # -- ${f.description} Allowed: ${f.allowed}.\n  ${f.key}: ${JSON.stringify(f.default)}\n`)
    .join('');
}

export const ENV_TEMPLATE_HEADER = '{{- /* GENERATED from src/config/fields.ts by npm run gen:docs — DO NOT EDIT */ -}}';

/** templates/_config-env.tpl: every CODEMODE_* variable, in field order. */
export function renderEnvTemplate(fields: ChartConfigField[]): string {
  const lines = [ENV_TEMPLATE_HEADER, '{{- define "codemode.configEnv" -}}'];
  for (const f of fields) {
    const value = f.template ? `{{ ${f.template} | quote }}` : `{{ include "codemode.envValue" .Values.config.${f.key} }}`;
    lines.push(`- name: ${f.env}`, `  value: ${value}`);
  }
  lines.push('{{- end }}', '');
  return lines.join('\n');
}
