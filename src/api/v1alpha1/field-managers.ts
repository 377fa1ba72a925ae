// Server-side apply field managers: one writer per status field. The controller owns a session's
// phase, conditions, pod and expiry; the gateway owns what only it sees (activity, call count, a
// dead interpreter). Each applies only its own fields, so neither can undo the other's writes.
export const CONTROLLER_FIELD_MANAGER = 'codemode-controller';
/** lastActivityTime and runCount of a SandboxSession. */
export const GATEWAY_FIELD_MANAGER = 'codemode-gateway';
/**
 * kernelLost of a SandboxSession. Its own manager: an apply removes the fields its manager owned
 * and left out, so one manager applying activity and loss separately would clear the other.
 */
export const GATEWAY_LOST_FIELD_MANAGER = 'codemode-gateway-lost';
/** The Deployment, Service and NetworkPolicy of a stdio UpstreamServer (applied by the leader). */
export const STDIO_FIELD_MANAGER = 'codemode-gateway-stdio';
