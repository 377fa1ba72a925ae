// The protections the sandbox self-check verifies (src/selfcheck). A closed set the product shows:
// CODEMODE_ACCEPT_UNENFORCED takes these names, /readyz and the metrics' `check` label use them.
export const SANDBOX_CHECKS = ['process_limit', 'memory_limit', 'readonly_root', 'no_service_account_token', 'network'] as const;
export type SandboxCheckName = (typeof SANDBOX_CHECKS)[number];
