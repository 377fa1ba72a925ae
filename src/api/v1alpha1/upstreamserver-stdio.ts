// spec.stdio of an UpstreamServer: a stdio MCP server (most published ones are) that the operator
// runs as a Deployment of the server's own image with our bridge (images/stdio-bridge) in front,
// a Service, and a NetworkPolicy whose egress the admin declares here. Ingress is never declared:
// only the gateway's pods may reach the bridge (src/upstreams/stdio-objects.ts).
import { z } from 'zod';
import { QuantitySchema } from './sandboxrun.js';

/** Port the bridge listens on inside the server's pod and the Service exposes. */
export const STDIO_BRIDGE_PORT = 8080;
/** Where the init container copies the bridge binary (an emptyDir mounted read-only in the server). */
export const STDIO_BRIDGE_DIR = '/codemode-bridge';

export const EGRESS_MODES = ['None', 'All', 'Rules'] as const;
export type EgressMode = (typeof EGRESS_MODES)[number];

const envName = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[-._a-zA-Z][-._a-zA-Z0-9]*$/, { error: 'must be an environment variable name (letters, digits, _, - and ., not starting with a digit)' });

const secretRef = z
  .object({
    name: z
      .string()
      .min(1)
      .max(253)
      .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, { error: 'must be the name of a Secret in this namespace' })
      .describe("A Secret in the UpstreamServer's namespace (read by the kubelet for the server's pod, never by the gateway)."),
    key: z
      .string()
      .min(1)
      .max(253)
      .regex(/^[-._a-zA-Z0-9]+$/, { error: 'must be a key of the Secret (letters, digits, -, _ and .)' })
      .describe('Key within the Secret.'),
  })
  .describe('The value comes from this Secret key.');

const EnvVarSchema = z
  .object({
    name: envName.describe('Variable name.'),
    value: z.string().max(32768).optional().describe('A plain value.'),
    secretKeyRef: secretRef.optional(),
  })
  .refine((e) => (e.value === undefined) !== (e.secretKeyRef === undefined), { error: 'must set exactly one of value and secretKeyRef' })
  .meta({ 'x-kubernetes-validations': [{ rule: 'has(self.value) != has(self.secretKeyRef)', message: 'must set exactly one of value and secretKeyRef' }] });

// As a SandboxRun's: above zero (the kubelet reads a limit of 0 as no limit) and bounded in length.
const quantity = QuantitySchema;
const cpuMemory = z.object({ cpu: quantity.optional().describe('CPU, e.g. 500m.'), memory: quantity.optional().describe('Memory, e.g. 256Mi.') }).optional();

const EgressSchema = z
  .object({
    allow: z
      .enum(EGRESS_MODES)
      .default('None')
      .describe('None: no network at all (e.g. a filesystem server). All: any destination. Rules: only the rules below, plus DNS.'),
    rules: z
      .array(z.record(z.string(), z.unknown()))
      .max(32)
      .optional()
      .describe('NetworkPolicyEgressRule objects (to, ports), exactly as in a NetworkPolicy; only with allow: Rules.'),
  })
  .refine((e) => (e.allow === 'Rules') === (e.rules !== undefined && e.rules.length > 0), {
    error: 'rules must be given (non-empty) exactly when allow is Rules',
  })
  .meta({
    'x-kubernetes-validations': [
      { rule: "(self.allow == 'Rules') == (has(self.rules) && size(self.rules) > 0)", message: 'rules must be given (non-empty) exactly when allow is Rules' },
    ],
  });

export const StdioServerSchema = z
  .object({
    image: z
      .string()
      .min(1)
      .max(512)
      .regex(/^[^\s]+$/, { error: 'must be an image reference without spaces, e.g. node:22-slim or ghcr.io/org/server:1.2' })
      .describe("The server's own image (any base: node, python, distroless). The bridge binary is added at run time."),
    imagePullPolicy: z
      .enum(['Always', 'IfNotPresent', 'Never'])
      .optional()
      .describe('Kubernetes image pull policy (default: the cluster default for the tag).'),
    command: z.array(z.string().min(1).max(4096)).min(1).max(64).describe('The stdio server command and its first arguments, e.g. [npx, -y, @org/server].'),
    args: z.array(z.string().max(4096)).max(256).optional().describe('More arguments after command.'),
    env: z
      .array(EnvVarSchema)
      .max(64)
      .optional()
      .meta({
        description: "Environment of the server process: plain values or Secret keys (the kubelet reads them; they never reach the gateway's sandboxes).",
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['name'],
      }),
    workingDir: z
      .string()
      .max(4096)
      .regex(/^\//, { error: 'must be an absolute path' })
      .optional()
      .describe("The server's working directory (default: the image's)."),
    resources: z
      .object({ requests: cpuMemory.describe('Requested CPU and memory.'), limits: cpuMemory.describe('CPU and memory limits.') })
      .optional()
      .describe('Resources of the server container (default: requests 50m CPU and 64Mi memory, a 512Mi memory limit).'),
    egress: EgressSchema.optional().describe("Where the server may connect (its pod's NetworkPolicy egress). Absent: allow None."),
    maxSessions: z
      .int()
      .min(1)
      .max(256)
      .default(8)
      .describe(
        "Most concurrent MCP sessions, each its own server process (every gateway replica holds one). Every process's threads count against the pod's process limit (the kubelet's podPidsLimit; a Node server has about 11): keep maxSessions times that under it.",
      ),
  })
  .describe('Run a stdio MCP server: the operator deploys the image with the codemode stdio bridge in front and connects to it.');
export type StdioServer = z.infer<typeof StdioServerSchema>;
