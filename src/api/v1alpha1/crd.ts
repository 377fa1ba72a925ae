// Builds the CustomResourceDefinitions (SandboxRun, SandboxSession) from the zod schemas, so enums, defaults,
// bounds and descriptions (`kubectl explain`) cannot drift from what the code validates.
// scripts/gen-crds.ts writes the result to crds/ (as YAML: crd-yaml.ts); nothing else should hand-edit it.
import { z } from 'zod';
import { API_VERSION, GROUP, SANDBOXRUN_KIND, SANDBOXRUN_PLURAL, SandboxRunSpecSchema, SandboxRunStatusSchema, VERSION } from './sandboxrun.js';
import { SANDBOXSESSION_KIND, SANDBOXSESSION_PLURAL, SandboxSessionSpecSchema, SandboxSessionStatusSchema } from './sandboxsession.js';

/** A node of an OpenAPI v3 schema as plain JSON. */
export type JsonSchema = { [key: string]: unknown };

export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description: string;
  priority?: number;
}

export interface CustomResourceDefinition {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: { name: string };
  spec: {
    group: string;
    names: {
      kind: string;
      listKind: string;
      plural: string;
      singular: string;
      shortNames: string[];
      categories: string[];
    };
    scope: 'Namespaced';
    versions: Array<{
      name: string;
      served: boolean;
      storage: boolean;
      subresources: { status: Record<string, never> };
      additionalPrinterColumns: PrinterColumn[];
      schema: { openAPIV3Schema: JsonSchema };
    }>;
  };
}

// JSON Schema keywords a structural Kubernetes schema cannot express. Failing loudly here
// beats a CRD the API server rejects at install time.
const FORBIDDEN_KEYS = ['$ref', '$defs', 'definitions', 'anyOf', 'oneOf', 'allOf', 'not', 'nullable'];

function isPlainObject(v: unknown): v is JsonSchema {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Rewrites zod's OpenAPI 3.0 output into a Kubernetes structural schema node (see the zod→CRD
 * notes in FIELD-NOTES.md). Pure; returns a new object.
 */
export function toStructural(node: JsonSchema, path = '$'): JsonSchema {
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    if (FORBIDDEN_KEYS.includes(key)) {
      throw new Error(`Schema at ${path} uses "${key}", which a structural CRD schema cannot express`);
    }
    if (key === '$schema') continue;
    out[key] = value;
  }
  // Kubernetes prunes unknown fields by default; `false` is not allowed, and `{}` means "keep
  // anything", which Kubernetes spells x-kubernetes-preserve-unknown-fields.
  if (out.additionalProperties === false) delete out.additionalProperties;
  if (isPlainObject(out.additionalProperties) && Object.keys(out.additionalProperties).length === 0) {
    delete out.additionalProperties;
    out['x-kubernetes-preserve-unknown-fields'] = true;
  }
  // `.int()` adds the ±2^53 safe-integer bounds: noise in `kubectl explain`, not a real limit.
  if (out.type === 'integer') {
    if (out.minimum === Number.MIN_SAFE_INTEGER) delete out.minimum;
    if (out.maximum === Number.MAX_SAFE_INTEGER) delete out.maximum;
  }
  // The API server validates `format: date-time` itself; zod's pattern for it is long and rejects
  // valid RFC 3339 offsets that other clients may write.
  if (out.format === 'date-time') delete out.pattern;
  if (out.type === undefined && out['x-kubernetes-preserve-unknown-fields'] !== true) {
    throw new Error(`Schema at ${path} has no type; every node of a structural schema needs one`);
  }
  if (isPlainObject(out.properties)) {
    const props: JsonSchema = {};
    for (const [name, child] of Object.entries(out.properties)) {
      props[name] = toStructural(child as JsonSchema, `${path}.${name}`);
    }
    out.properties = props;
  }
  if (isPlainObject(out.items)) out.items = toStructural(out.items, `${path}[]`);
  if (isPlainObject(out.additionalProperties)) {
    out.additionalProperties = toStructural(out.additionalProperties, `${path}{}`);
  }
  return out;
}

function schemaOf(schema: z.ZodType, description: string, path: string): JsonSchema {
  // io: 'input' so fields with defaults are optional (the API server fills them in).
  const json = z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input' }) as JsonSchema;
  return { description, ...toStructural(json, path) };
}

export interface KindDefinition {
  kind: string;
  plural: string;
  shortNames: string[];
  description: string;
  specSchema: z.ZodType;
  specDescription: string;
  statusSchema: z.ZodType;
  statusDescription: string;
  printerColumns: PrinterColumn[];
}

function openApiSchema(d: KindDefinition): JsonSchema {
  return {
    type: 'object',
    description: d.description,
    properties: {
      apiVersion: {
        type: 'string',
        description: `APIVersion defines the versioned schema of this representation of an object (${API_VERSION}).`,
      },
      kind: {
        type: 'string',
        description: `Kind is the REST resource this object represents (${d.kind}).`,
      },
      metadata: { type: 'object' },
      spec: schemaOf(d.specSchema, d.specDescription, '$.spec'),
      status: schemaOf(d.statusSchema, d.statusDescription, '$.status'),
    },
    required: ['spec'],
  };
}

export function buildCrd(d: KindDefinition): CustomResourceDefinition {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${d.plural}.${GROUP}` },
    spec: {
      group: GROUP,
      names: {
        kind: d.kind,
        listKind: `${d.kind}List`,
        plural: d.plural,
        singular: d.kind.toLowerCase(),
        shortNames: d.shortNames,
        categories: ['codemode'],
      },
      scope: 'Namespaced',
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: d.printerColumns,
          schema: { openAPIV3Schema: openApiSchema(d) },
        },
      ],
    },
  };
}

export const SANDBOXRUN_PRINTER_COLUMNS: PrinterColumn[] = [
  { name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Lifecycle phase of the run.' },
  { name: 'Language', type: 'string', jsonPath: '.spec.language', description: 'Language of the code.' },
  { name: 'Owner', type: 'string', jsonPath: '.spec.owner.user', description: 'Who created the run.' },
  { name: 'Exit', type: 'integer', jsonPath: '.status.exitCode', description: 'Exit code of the program.' },
  {
    name: 'Duration(ms)',
    type: 'integer',
    jsonPath: '.status.durationMs',
    description: 'Execution time in milliseconds.',
  },
  {
    name: 'Reason',
    type: 'string',
    jsonPath: '.status.reason',
    description: 'Reason of the current phase.',
    priority: 1,
  },
  { name: 'Pod', type: 'string', jsonPath: '.status.podName', description: 'Sandbox pod.', priority: 1 },
  {
    name: 'Session',
    type: 'string',
    jsonPath: '.spec.session',
    description: 'The session the code ran in (session calls and their audit records).',
    priority: 1,
  },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp', description: 'Time since creation.' },
];

const SANDBOXRUN_DEFINITION: KindDefinition = {
  kind: SANDBOXRUN_KIND,
  plural: SANDBOXRUN_PLURAL,
  shortNames: ['sbr'],
  description: 'SandboxRun executes one piece of code in a fresh, hardened sandbox pod (or in a SandboxSession) and records its output and exit status.',
  specSchema: SandboxRunSpecSchema,
  specDescription: 'What to run: the code, its language and limits.',
  statusSchema: SandboxRunStatusSchema,
  statusDescription: 'Observed state of the run, written by the controller.',
  printerColumns: SANDBOXRUN_PRINTER_COLUMNS,
};

/** The openAPIV3Schema of the SandboxRun CRD. */
export function buildSandboxRunOpenApiSchema(): JsonSchema {
  return openApiSchema(SANDBOXRUN_DEFINITION);
}

/** The SandboxRun CustomResourceDefinition as a plain object, ready to serialize or apply. */
export function buildSandboxRunCrd(): CustomResourceDefinition {
  return buildCrd(SANDBOXRUN_DEFINITION);
}

export const SANDBOXSESSION_PRINTER_COLUMNS: PrinterColumn[] = [
  { name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Lifecycle phase of the session.' },
  { name: 'Language', type: 'string', jsonPath: '.spec.language', description: 'Language of the interpreter.' },
  { name: 'Owner', type: 'string', jsonPath: '.spec.owner.user', description: 'Who created the session.' },
  { name: 'Runs', type: 'integer', jsonPath: '.status.runCount', description: 'Calls executed in the session.' },
  { name: 'Last-Activity', type: 'date', jsonPath: '.status.lastActivityTime', description: 'Time since the last call.' },
  {
    name: 'Reason',
    type: 'string',
    jsonPath: '.status.reason',
    description: 'Why the session is in its phase (e.g. UserSessionLimit, KernelLost).',
    priority: 1,
  },
  { name: 'Expires', type: 'string', jsonPath: '.status.expiresAt', description: 'When an idle session is deleted.', priority: 1 },
  { name: 'Pod', type: 'string', jsonPath: '.status.podName', description: 'Sandbox pod.', priority: 1 },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp', description: 'Time since creation.' },
];

/** The SandboxSession CustomResourceDefinition. */
export function buildSandboxSessionCrd(): CustomResourceDefinition {
  return buildCrd({
    kind: SANDBOXSESSION_KIND,
    plural: SANDBOXSESSION_PLURAL,
    shortNames: ['sbs'],
    description:
      'SandboxSession keeps an interpreter alive in a hardened sandbox pod between calls; it is deleted when idle past idleTimeoutSeconds or older than maxLifetimeSeconds.',
    specSchema: SandboxSessionSpecSchema,
    specDescription: "The interpreter language and the session's lifetime limits.",
    statusSchema: SandboxSessionStatusSchema,
    statusDescription: 'Observed state of the session, written by the controller and the gateway.',
    printerColumns: SANDBOXSESSION_PRINTER_COLUMNS,
  });
}

export const CRD_FILE_HEADER = '# GENERATED from src/api by npm run gen:crds — DO NOT EDIT';
