{{- /* GENERATED from src/config/fields.ts by npm run gen:docs — DO NOT EDIT */ -}}
{{- define "codemode.configEnv" -}}
- name: CODEMODE_NAMESPACE
  value: {{ include "codemode.sandboxNamespace" . | quote }}
- name: CODEMODE_SANDBOX_IMAGE
  value: {{ include "codemode.envValue" .Values.config.sandboxImage }}
- name: CODEMODE_IMAGE_PYTHON
  value: {{ include "codemode.envValue" .Values.config.imagePython }}
- name: CODEMODE_IMAGE_BASH
  value: {{ include "codemode.envValue" .Values.config.imageBash }}
- name: CODEMODE_IMAGE_SH
  value: {{ include "codemode.envValue" .Values.config.imageSh }}
- name: CODEMODE_IMAGE_NODE
  value: {{ include "codemode.envValue" .Values.config.imageNode }}
- name: CODEMODE_IMAGE_PULL_POLICY
  value: {{ include "codemode.envValue" .Values.config.imagePullPolicy }}
- name: CODEMODE_DEFAULT_TIMEOUT_SECONDS
  value: {{ include "codemode.envValue" .Values.config.defaultTimeoutSeconds }}
- name: CODEMODE_MAX_TIMEOUT_SECONDS
  value: {{ include "codemode.envValue" .Values.config.maxTimeoutSeconds }}
- name: CODEMODE_MAX_CODE_BYTES
  value: {{ include "codemode.envValue" .Values.config.maxCodeBytes }}
- name: CODEMODE_OUTPUT_CAP_CHARS
  value: {{ include "codemode.envValue" .Values.config.outputCapChars }}
- name: CODEMODE_DEFAULT_CPU
  value: {{ include "codemode.envValue" .Values.config.defaultCpu }}
- name: CODEMODE_DEFAULT_MEMORY
  value: {{ include "codemode.envValue" .Values.config.defaultMemory }}
- name: CODEMODE_MAX_CPU
  value: {{ include "codemode.envValue" .Values.config.maxCpu }}
- name: CODEMODE_MAX_MEMORY
  value: {{ include "codemode.envValue" .Values.config.maxMemory }}
- name: CODEMODE_CPU_REQUEST
  value: {{ include "codemode.envValue" .Values.config.cpuRequest }}
- name: CODEMODE_MEMORY_REQUEST
  value: {{ include "codemode.envValue" .Values.config.memoryRequest }}
- name: CODEMODE_EPHEMERAL_STORAGE_LIMIT
  value: {{ include "codemode.envValue" .Values.config.ephemeralStorageLimit }}
- name: CODEMODE_WORKSPACE_SIZE_LIMIT
  value: {{ include "codemode.envValue" .Values.config.workspaceSizeLimit }}
- name: CODEMODE_WORKSPACE_MEDIUM
  value: {{ include "codemode.envValue" .Values.config.workspaceMedium }}
- name: CODEMODE_TMP_SIZE_LIMIT
  value: {{ include "codemode.envValue" .Values.config.tmpSizeLimit }}
- name: CODEMODE_TTL_SECONDS_AFTER_FINISHED
  value: {{ include "codemode.envValue" .Values.config.ttlSecondsAfterFinished }}
- name: CODEMODE_POD_STARTUP_TIMEOUT_SECONDS
  value: {{ include "codemode.envValue" .Values.config.podStartupTimeoutSeconds }}
- name: CODEMODE_RESYNC_SECONDS
  value: {{ include "codemode.envValue" .Values.config.resyncSeconds }}
- name: CODEMODE_RUNTIME_CLASS
  value: {{ include "codemode.envValue" .Values.config.runtimeClassName }}
- name: CODEMODE_BIND_ADDRESS
  value: {{ include "codemode.envValue" .Values.config.bindAddress }}
- name: CODEMODE_PORT
  value: {{ include "codemode.envValue" .Values.config.port }}
- name: CODEMODE_ALLOWED_HOSTS
  value: {{ include "codemode.allowedHosts" . | quote }}
- name: CODEMODE_ALLOWED_ORIGINS
  value: {{ include "codemode.envValue" .Values.config.allowedOrigins }}
- name: CODEMODE_SESSION_MAX_IDLE_TIMEOUT_SECONDS
  value: {{ include "codemode.envValue" .Values.config.sessionMaxIdleTimeoutSeconds }}
- name: CODEMODE_SESSION_MAX_LIFETIME_SECONDS
  value: {{ include "codemode.envValue" .Values.config.sessionMaxLifetimeSeconds }}
- name: CODEMODE_WARM_POOL_SIZE
  value: {{ include "codemode.envValue" .Values.config.warmPoolSize }}
- name: CODEMODE_WARM_POOL_REFILL_DEFER_MS
  value: {{ include "codemode.envValue" .Values.config.warmPoolRefillDeferMs }}
- name: CODEMODE_WARM_POOL_RESERVE
  value: {{ include "codemode.envValue" .Values.config.warmPoolReserve }}
- name: CODEMODE_MAX_FILE_BYTES
  value: {{ include "codemode.envValue" .Values.config.maxFileBytes }}
- name: CODEMODE_LOG_LEVEL
  value: {{ include "codemode.envValue" .Values.config.logLevel }}
- name: CODEMODE_AUTH_MODE
  value: {{ include "codemode.envValue" .Values.config.authMode }}
- name: CODEMODE_AUTH_NONE_BEYOND_LOOPBACK
  value: {{ include "codemode.envValue" .Values.config.authNoneBeyondLoopback }}
- name: CODEMODE_AUTH_TOKENS_SECRET
  value: {{ include "codemode.envValue" .Values.config.authTokensSecret }}
- name: CODEMODE_AUTH_AUDIENCE
  value: {{ include "codemode.envValue" .Values.config.authAudience }}
- name: CODEMODE_OIDC_ISSUER
  value: {{ include "codemode.envValue" .Values.config.oidcIssuer }}
- name: CODEMODE_OIDC_AUDIENCE
  value: {{ include "codemode.envValue" .Values.config.oidcAudience }}
- name: CODEMODE_OIDC_JWKS_URL
  value: {{ include "codemode.envValue" .Values.config.oidcJwksUrl }}
- name: CODEMODE_OIDC_USERNAME_CLAIM
  value: {{ include "codemode.envValue" .Values.config.oidcUsernameClaim }}
- name: CODEMODE_OIDC_GROUPS_CLAIM
  value: {{ include "codemode.envValue" .Values.config.oidcGroupsClaim }}
- name: CODEMODE_USERNAME_PREFIX
  value: {{ include "codemode.envValue" .Values.config.usernamePrefix }}
- name: CODEMODE_GROUPS_PREFIX
  value: {{ include "codemode.envValue" .Values.config.groupsPrefix }}
- name: CODEMODE_PUBLIC_URL
  value: {{ include "codemode.publicUrl" . | quote }}
- name: CODEMODE_ADMIN_GROUPS
  value: {{ include "codemode.envValue" .Values.config.adminGroups }}
- name: CODEMODE_SANDBOX_CHECK_INTERVAL_SECONDS
  value: {{ include "codemode.envValue" .Values.config.sandboxCheckIntervalSeconds }}
- name: CODEMODE_MAX_PROCESSES
  value: {{ include "codemode.envValue" .Values.config.maxProcesses }}
- name: CODEMODE_ACCEPT_UNENFORCED
  value: {{ include "codemode.envValue" .Values.config.acceptUnenforced }}
- name: CODEMODE_OUTPUT_CAP_BYTES
  value: {{ include "codemode.envValue" .Values.config.outputCapBytes }}
- name: CODEMODE_MAX_TTL_SECONDS_AFTER_FINISHED
  value: {{ include "codemode.envValue" .Values.config.maxTtlSecondsAfterFinished }}
- name: CODEMODE_MAX_CONCURRENT_RUNS
  value: {{ include "codemode.envValue" .Values.config.maxConcurrentRuns }}
- name: CODEMODE_MAX_NAMESPACE_RUNS
  value: {{ include "codemode.envValue" .Values.config.maxNamespaceRuns }}
- name: CODEMODE_MAX_SESSIONS
  value: {{ include "codemode.envValue" .Values.config.maxSessions }}
- name: CODEMODE_RUN_QUEUE_LENGTH
  value: {{ include "codemode.envValue" .Values.config.runQueueLength }}
- name: CODEMODE_RUN_QUEUE_TIMEOUT_SECONDS
  value: {{ include "codemode.envValue" .Values.config.runQueueTimeoutSeconds }}
- name: CODEMODE_USER_REQUESTS_PER_SECOND
  value: {{ include "codemode.envValue" .Values.config.userRequestsPerSecond }}
- name: CODEMODE_MAX_BATCH_SIZE
  value: {{ include "codemode.envValue" .Values.config.maxBatchSize }}
- name: CODEMODE_PROGRESS_HEARTBEAT_SECONDS
  value: {{ include "codemode.envValue" .Values.config.progressHeartbeatSeconds }}
- name: CODEMODE_MAX_CONNECTIONS
  value: {{ include "codemode.envValue" .Values.config.maxConnections }}
- name: CODEMODE_WARM_POOL_MIN
  value: {{ include "codemode.envValue" .Values.config.warmPoolMin }}
- name: CODEMODE_WARM_POOL_MAX
  value: {{ include "codemode.envValue" .Values.config.warmPoolMax }}
- name: CODEMODE_USER_MAX_RUNS
  value: {{ include "codemode.envValue" .Values.config.userMaxRuns }}
- name: CODEMODE_USER_MAX_SESSIONS
  value: {{ include "codemode.envValue" .Values.config.userMaxSessions }}
- name: CODEMODE_USER_MAX_EXECUTIONS_PER_MINUTE
  value: {{ include "codemode.envValue" .Values.config.userMaxExecutionsPerMinute }}
- name: CODEMODE_AUDIT_QUEUE_LENGTH
  value: {{ include "codemode.envValue" .Values.config.auditQueueLength }}
- name: CODEMODE_AUDIT_TTL_SECONDS
  value: {{ include "codemode.envValue" .Values.config.auditTtlSeconds }}
- name: CODEMODE_AUDIT_MAX_RECORDS
  value: {{ include "codemode.envValue" .Values.config.auditMaxRecords }}
- name: CODEMODE_AUDIT_MAX_RECORDS_PER_USER
  value: {{ include "codemode.envValue" .Values.config.auditMaxRecordsPerUser }}
- name: CODEMODE_TOOL_CALLS_PER_RUN
  value: {{ include "codemode.envValue" .Values.config.toolCallsPerRun }}
- name: CODEMODE_TOOL_CALL_TIMEOUT_SECONDS
  value: {{ include "codemode.envValue" .Values.config.toolCallTimeoutSeconds }}
- name: CODEMODE_TOOL_RESULT_MAX_BYTES
  value: {{ include "codemode.envValue" .Values.config.toolResultMaxBytes }}
- name: CODEMODE_TOOL_BYTES_PER_RUN
  value: {{ include "codemode.envValue" .Values.config.toolBytesPerRun }}
- name: CODEMODE_UPSTREAM_HEALTH_INTERVAL_SECONDS
  value: {{ include "codemode.envValue" .Values.config.upstreamHealthIntervalSeconds }}
- name: CODEMODE_UPSTREAM_REQUEST_TIMEOUT_SECONDS
  value: {{ include "codemode.envValue" .Values.config.upstreamRequestTimeoutSeconds }}
- name: CODEMODE_UPSTREAM_MESSAGE_MAX_BYTES
  value: {{ include "codemode.envValue" .Values.config.upstreamMessageMaxBytes }}
- name: CODEMODE_UPSTREAM_CALLS_PER_SERVER
  value: {{ include "codemode.envValue" .Values.config.upstreamCallsPerServer }}
- name: CODEMODE_UPSTREAM_CALLS_PER_USER
  value: {{ include "codemode.envValue" .Values.config.upstreamCallsPerUser }}
- name: CODEMODE_DEFAULT_PROFILE
  value: {{ include "codemode.envValue" .Values.config.defaultProfile }}
- name: CODEMODE_RESULT_FORMAT
  value: {{ include "codemode.envValue" .Values.config.resultFormat }}
- name: CODEMODE_DISPLAY_MAX_IMAGE_BYTES
  value: {{ include "codemode.envValue" .Values.config.displayMaxImageBytes }}
- name: CODEMODE_DISPLAY_MAX_BYTES
  value: {{ include "codemode.envValue" .Values.config.displayMaxBytes }}
- name: CODEMODE_DISPLAY_MAX_ITEMS
  value: {{ include "codemode.envValue" .Values.config.displayMaxItems }}
- name: CODEMODE_STDIO_BRIDGE_IMAGE
  value: {{ include "codemode.envValue" .Values.config.stdioBridgeImage }}
- name: CODEMODE_STDIO_GATEWAY_POD_LABELS
  value: {{ printf "app.kubernetes.io/name=%s,app.kubernetes.io/instance=%s" (include "codemode.name" .) .Release.Name | quote }}
- name: CODEMODE_STDIO_GATEWAY_NAMESPACE
  value: {{ .Release.Namespace | quote }}
- name: CODEMODE_PACKAGES_ECOSYSTEMS
  value: {{ include "codemode.envValue" .Values.config.packagesEcosystems }}
- name: CODEMODE_PACKAGES_ALLOW
  value: {{ include "codemode.envValue" .Values.config.packagesAllow }}
- name: CODEMODE_PACKAGES_DENY
  value: {{ include "codemode.envValue" .Values.config.packagesDeny }}
- name: CODEMODE_PACKAGES_MAX_PACKAGE_BYTES
  value: {{ include "codemode.envValue" .Values.config.packagesMaxPackageBytes }}
- name: CODEMODE_PACKAGES_MAX_TOTAL_BYTES
  value: {{ include "codemode.envValue" .Values.config.packagesMaxTotalBytes }}
- name: CODEMODE_PACKAGES_PYPI_INDEX_URL
  value: {{ include "codemode.envValue" .Values.config.packagesPypiIndexUrl }}
- name: CODEMODE_PACKAGES_NPM_REGISTRY
  value: {{ include "codemode.envValue" .Values.config.packagesNpmRegistry }}
- name: CODEMODE_PACKAGES_CA_FILE
  value: {{ include "codemode.envValue" .Values.config.packagesCaFile }}
- name: CODEMODE_PACKAGES_EGRESS_CIDRS
  value: {{ include "codemode.envValue" .Values.config.packagesEgressCidrs }}
- name: CODEMODE_PACKAGES_EGRESS_EXCEPT
  value: {{ include "codemode.envValue" .Values.config.packagesEgressExcept }}
- name: CODEMODE_PACKAGES_TIMEOUT_SECONDS
  value: {{ include "codemode.envValue" .Values.config.packagesTimeoutSeconds }}
{{- end }}
