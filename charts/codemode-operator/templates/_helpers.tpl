{{/* Names and labels shared by every template. */}}

{{- define "codemode.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "codemode.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "codemode.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "codemode.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "codemode.selectorLabels" -}}
app.kubernetes.io/name: {{ include "codemode.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "codemode.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "codemode.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels of hook pods (test, cleanup): never the gateway's selector labels. Args: (list $ component). */}}
{{- define "codemode.hookLabels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ printf "%s-%s" (include "codemode.name" $) (index . 1) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
app.kubernetes.io/managed-by: {{ $.Release.Service }}
{{- end }}

{{- define "codemode.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "codemode.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "codemode.image" -}}
{{- printf "%s:%s" .Values.image.repository (toString (default .Chart.AppVersion .Values.image.tag)) }}
{{- end }}

{{/*
Where SandboxRuns, sandbox pods, their NetworkPolicy, the leader Lease and the runtime ConfigMap
live (CODEMODE_NAMESPACE). Separate from the gateway's namespace by default, so the pods/exec
permission never covers the gateway's own pods.
*/}}
{{- define "codemode.sandboxNamespace" -}}
{{- if .Values.sandboxNamespace.separate }}
{{- default (printf "%s-sandboxes" .Release.Namespace) .Values.sandboxNamespace.name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- .Release.Namespace }}
{{- end }}
{{- end }}

{{/* Host names clients may use (CODEMODE_ALLOWED_HOSTS): the Service's names, ingress and route hosts, config.allowedHosts. */}}
{{- define "codemode.allowedHosts" -}}
{{- $svc := include "codemode.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $hosts := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.clusterDomain) -}}
{{- if .Values.ingress.enabled }}{{ range .Values.ingress.hosts }}{{ $hosts = append $hosts . }}{{ end }}{{ end -}}
{{- if .Values.httpRoute.enabled }}{{ range .Values.httpRoute.hostnames }}{{ $hosts = append $hosts . }}{{ end }}{{ end -}}
{{- $extra := .Values.config.allowedHosts -}}
{{- if kindIs "string" $extra }}{{ $extra = splitList "," $extra }}{{ end -}}
{{- range $extra }}{{ if . }}{{ $hosts = append $hosts (trim .) }}{{ end }}{{ end -}}
{{- $hosts | uniq | join "," -}}
{{- end }}

{{/*
The public base URL in the OAuth metadata and WWW-Authenticate answers: config.publicUrl, else the
Ingress's first host (https when the Ingress has TLS blocks), else empty (the gateway takes it
from each request, which behind a TLS-terminating proxy says http).
*/}}
{{- define "codemode.publicUrl" -}}
{{- if .Values.config.publicUrl }}{{ .Values.config.publicUrl }}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts }}{{ printf "%s://%s" (ternary "https" "http" (not (empty .Values.ingress.tls))) (first .Values.ingress.hosts) }}
{{- end }}
{{- end }}

{{/*
The ports of the OIDC issuer's URLs (its discovery document and its JWKS): the URL's own port, or
443 for https and 80 for http.
*/}}
{{- define "codemode.oidcPorts" -}}
{{- $ports := list -}}
{{- range (list .Values.config.oidcIssuer .Values.config.oidcJwksUrl) }}
{{- if . }}
{{- $u := urlParse . -}}
{{- $port := regexFind "[0-9]+$" (regexFind ":[0-9]+$" $u.host) -}}
{{- $ports = append $ports (default (ternary "443" "80" (eq $u.scheme "https")) $port) -}}
{{- end }}
{{- end }}
{{- $ports | uniq | join "," -}}
{{- end }}

{{/* A config value as an env string: lists joined with commas, null as empty (the gateway default). */}}
{{- define "codemode.envValue" -}}
{{- if kindIs "invalid" . }}{{ "" | quote }}
{{- else if kindIs "slice" . }}{{ join "," . | quote }}
{{- else if kindIs "float64" . }}{{ int64 . | toString | quote }}
{{- else }}{{ toString . | quote }}
{{- end }}
{{- end }}

{{/*
SIGTERM: runs in flight get pod start-up + maximum timeout + 15 s (src/main.ts); the kubelet must
wait at least that long, plus 15 s for the endpoint drain and process exit, plus the preStop sleep
(which the grace period also covers).
*/}}
{{- define "codemode.terminationGracePeriodSeconds" -}}
{{- if .Values.terminationGracePeriodSeconds }}
{{- .Values.terminationGracePeriodSeconds }}
{{- else }}
{{- add (int64 .Values.config.podStartupTimeoutSeconds) (int64 .Values.config.maxTimeoutSeconds) 30 (int64 .Values.preStopSleepSeconds) }}
{{- end }}
{{- end }}
