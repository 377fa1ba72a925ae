// UpstreamServer: an MCP server of the team (Streamable HTTP) whose tools sandboxed code may call
// through the gateway (code mode, issue 11). The gateway keeps a client connection to each one,
// caches its tool catalog and writes what it sees into the status. Credentials stay in Secrets:
// the spec only names them, and the gateway reads them itself.
import { z } from 'zod';
import { ConditionSchema } from './conditions.js';
import { API_VERSION, MAX_CONDITIONS, ObjectMetaSchema, describeIssues } from './sandboxrun.js';
import { StdioServerSchema } from './upstreamserver-stdio.js';

export const UPSTREAMSERVER_KIND = 'UpstreamServer';
export const UPSTREAMSERVER_PLURAL = 'upstreamservers';
export const MAX_CALL_TIMEOUT_SECONDS = 3600;
/** status.lastError is cut to this many characters (what the gateway saw, secrets removed). */
export const MAX_UPSTREAM_ERROR_LENGTH = 1024;

/** Reasons of an UpstreamServer's Ready condition. */
export const UpstreamReasons = {
  /** Connected; the tool catalog was listed (status.toolCount). */
  CatalogLoaded: 'CatalogLoaded',
  /** No connection yet (first attempt in progress). */
  Connecting: 'Connecting',
  /** The upstream did not answer, or the connection broke; the gateway reconnects with backoff. */
  Unreachable: 'Unreachable',
  /** The upstream refused the gateway's credentials (HTTP 401 or 403). */
  Unauthorized: 'Unauthorized',
  /** A Secret or key named in the spec does not exist (or the gateway may not read it). */
  SecretNotFound: 'SecretNotFound',
  /** The spec is invalid; the message says which field and what to write instead. */
  InvalidSpec: 'InvalidSpec',
  /** spec.stdio: the server's Deployment has no available replica yet (nothing wrong seen so far). */
  ServerStarting: 'ServerStarting',
  /** spec.stdio: the server's pod cannot run (image pull error, crash loop, bad config) or its objects were refused. */
  ServerFailing: 'ServerFailing',
} as const;
export type UpstreamReason = (typeof UpstreamReasons)[keyof typeof UpstreamReasons];

const k8sName = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, { error: 'must be the name of a Secret in this namespace (lowercase letters, digits, - and .)' });

export const SecretKeyRefSchema = z
  .object({
    name: k8sName.describe("Name of a Secret in the UpstreamServer's namespace. The gateway needs RBAC to read it (the chart's upstreams.secretNames)."),
    key: z
      .string()
      .min(1)
      .max(253)
      .regex(/^[-._a-zA-Z0-9]+$/, { error: 'must be a key of the Secret (letters, digits, -, _ and .)' })
      .describe('Key within the Secret whose value is used.'),
  })
  .describe('A value taken from a Secret; never copied into sandboxes, runs, status, logs or Events.');
export type SecretKeyRef = z.infer<typeof SecretKeyRefSchema>;

/** Headers the gateway sets itself; a spec naming them would break the protocol. */
export const RESERVED_HEADERS = ['host', 'content-length', 'content-type', 'accept', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id'];

const headerName = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/, { error: "must be an HTTP header name (letters, digits and !#$%&'*+.^_`|~-), e.g. X-Api-Key" })
  .refine((h) => !RESERVED_HEADERS.includes(h.toLowerCase()), {
    error: `must not be one the gateway sets itself (${RESERVED_HEADERS.join(', ')})`,
  })
  .meta({
    'x-kubernetes-validations': [
      {
        rule: `!(self.lowerAscii() in ${JSON.stringify(RESERVED_HEADERS)})`,
        message: `must not be one the gateway sets itself (${RESERVED_HEADERS.join(', ')})`,
      },
    ],
  });

/** A tool name glob: `*` any run of characters, `?` one character; nothing else is special. */
const glob = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[\x21-\x7e]+$/, { error: 'must be a tool name or glob of printable characters without spaces (* and ? are wildcards), e.g. get_* ' })
  .describe('A tool name, or a glob: * matches any characters, ? one character.');

const ONE_OF_URL_STDIO = 'set exactly one of url (a Streamable HTTP server) and stdio (a stdio server the operator runs)';

export const UpstreamServerSpecSchema = z
  .object({
    url: z
      .string()
      .min(1)
      .max(2048)
      .regex(/^https?:\/\/[^\s/?#]+([/?#][^\s]*)?$/, {
        error: "must be the http:// or https:// URL of the upstream's Streamable HTTP endpoint, e.g. http://github-mcp.tools.svc:8080/mcp",
      })
      .meta({
        'x-kubernetes-validations': [
          {
            rule: "self.startsWith('http://') || self.startsWith('https://')",
            message: "must be the http:// or https:// URL of the upstream's Streamable HTTP endpoint, e.g. http://github-mcp.tools.svc:8080/mcp",
          },
        ],
      })
      .optional()
      .describe(
        "The upstream's Streamable HTTP endpoint: an in-cluster Service (http://name.namespace.svc:port/mcp) or an external URL. Exactly one of url and stdio.",
      ),
    stdio: StdioServerSchema.optional(),
    headers: z
      .array(
        z.object({
          name: headerName.describe('HTTP header name, e.g. X-Api-Key.'),
          secretKeyRef: SecretKeyRefSchema,
        }),
      )
      .max(16)
      .optional()
      .meta({
        description: 'HTTP headers sent on every request to the upstream, their values read from Secrets.',
        'x-kubernetes-list-type': 'map',
        'x-kubernetes-list-map-keys': ['name'],
      }),
    bearerTokenSecretRef: SecretKeyRefSchema.optional().describe('A token sent as "Authorization: Bearer <token>", read from a Secret.'),
    tools: z
      .object({
        allow: z.array(glob).max(256).optional().describe('Only tools matching one of these globs are offered. Empty or absent: all tools.'),
        deny: z.array(glob).max(256).optional().describe('Tools matching any of these globs are never offered or called (deny wins over allow).'),
      })
      .optional()
      .describe("Which of the upstream's tools sandboxed code may see and call."),
    callTimeoutSeconds: z
      .int()
      .min(1)
      .max(MAX_CALL_TIMEOUT_SECONDS)
      .default(60)
      .describe("Longest one tool call may take (1-3600 seconds); a run's own limits may cut it shorter."),
    access: z
      .object({
        users: z
          .array(z.string().min(1).max(256).describe('A user name as the gateway authenticates it (with CODEMODE_USERNAME_PREFIX when set).'))
          .max(256)
          .optional()
          .describe('Users who may use this upstream.'),
        groups: z
          .array(z.string().min(1).max(256).describe('A group name (with CODEMODE_GROUPS_PREFIX when set).'))
          .max(256)
          .optional()
          .describe('Members of these groups may use this upstream.'),
      })
      .optional()
      .describe('Who may see and call this upstream through the gateway. Absent or both lists empty: every authenticated user.'),
  })
  .refine((s) => (s.url === undefined) !== (s.stdio === undefined), { error: ONE_OF_URL_STDIO })
  .meta({ 'x-kubernetes-validations': [{ rule: 'has(self.url) != has(self.stdio)', message: ONE_OF_URL_STDIO }] });
export type UpstreamServerSpec = z.infer<typeof UpstreamServerSpecSchema>;

const timestamp = z.iso.datetime({ offset: true }).max(64);

export const UpstreamServerStatusSchema = z.object({
  observedGeneration: z.int().min(0).optional().describe('The metadata.generation this status was computed from.'),
  conditions: z
    .array(ConditionSchema)
    .max(MAX_CONDITIONS)
    .optional()
    .meta({
      description: 'Ready: True when the gateway is connected and has the tool catalog; its reason says why not otherwise.',
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
    }),
  toolCount: z.int().min(0).optional().describe('Tools offered after the allow and deny lists.'),
  lastError: z
    .string()
    .max(MAX_UPSTREAM_ERROR_LENGTH)
    .optional()
    .describe('The last error the gateway saw talking to the upstream (never contains secret values).'),
  lastRefreshTime: timestamp.optional().describe('When the tool catalog was last listed successfully (RFC 3339).'),
});
export type UpstreamServerStatus = z.infer<typeof UpstreamServerStatusSchema>;

export const UpstreamServerSchema = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal(UPSTREAMSERVER_KIND),
  metadata: ObjectMetaSchema,
  spec: UpstreamServerSpecSchema,
  status: UpstreamServerStatusSchema.optional(),
});
export type UpstreamServer = z.infer<typeof UpstreamServerSchema>;

export function parseUpstreamServer(obj: unknown): { ok: true; server: UpstreamServer } | { ok: false; message: string } {
  const r = UpstreamServerSchema.safeParse(obj, { reportInput: true });
  if (r.success) return { ok: true, server: r.data };
  return { ok: false, message: `Invalid UpstreamServer: ${describeIssues(r.error.issues)}. Fix the spec with kubectl edit upstreamserver.` };
}
