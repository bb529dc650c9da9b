{{/* The port tether listens on in the container: /healthz, /readyz, /metrics,
/api/v1/apps and /webhooks/<provider> are all served there. */}}
{{- define "tether.httpPort" -}}8080{{- end -}}

{{/* Where the config, webhook secrets, Git credentials and the Git cache live. */}}
{{- define "tether.configDir" -}}/etc/tether{{- end -}}
{{- define "tether.cacheDir" -}}/var/cache/tether{{- end -}}

{{- define "tether.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tether.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels on every object. No app.kubernetes.io/managed-by: whatever applies the
rendered chart (Helm, or tether syncing it from Git) sets its own ownership marks, and a
fixed value here would contradict one of them. */}}
{{- define "tether.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "tether.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: tether
{{- end -}}

{{- define "tether.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tether.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tether.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tether.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "tether.image" -}}
{{- $repository := required "image.repository is required: tether publishes no image yet; build one with the project's Dockerfile (docker build -t REGISTRY/tether:TAG .), push it to a registry the cluster pulls from and set image.repository=REGISTRY/tether (charts/tether/README.md, \"The image\")" .Values.image.repository -}}
{{- printf "%s:%s" $repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The webhook providers tether serves, as in the config schema. */}}
{{- define "tether.webhookProviders" -}}github gitlab gitea bitbucket azuredevops generic{{- end -}}

{{/* The Secret key mounted for a webhook provider: `key`, default the provider name. */}}
{{- define "tether.webhookKey" -}}
{{- $ref := index . 1 -}}
{{- default (index . 0) $ref.key -}}
{{- end -}}

{{/* The key of the API token's Secret. */}}
{{- define "tether.apiTokenKey" -}}
{{- default "token" .Values.apiToken.key -}}
{{- end -}}

{{/* The Secret holding the API token: the existing one, the generated one, or none
(empty) when the API is served without a token. */}}
{{- define "tether.apiTokenSecret" -}}
{{- if .Values.apiToken.existingSecret -}}
{{- .Values.apiToken.existingSecret -}}
{{- else if .Values.apiToken.generate -}}
{{- printf "%s-api-token" (include "tether.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the replicas' peer token (issue #24: replicas sign their
calls to each other with it), generated with shards above 1; empty otherwise. */}}
{{- define "tether.peerTokenSecret" -}}
{{- if gt (int .Values.shards) 1 -}}
{{- printf "%s-peer-token" (include "tether.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* tether's stop budget: the pod's grace period less 5s, for the process to exit
after its last request. */}}
{{- define "tether.shutdownTimeout" -}}
{{- $grace := int .Values.terminationGracePeriodSeconds -}}
{{- if lt $grace 6 -}}
{{- fail (printf "terminationGracePeriodSeconds must be at least 6 (tether stops within it less 5s), not %d" $grace) -}}
{{- end -}}
{{- printf "%ds" (sub $grace 5) -}}
{{- end -}}

{{/* The Git credentials as a source.credentials object (files under /etc/tether/git),
or an empty dict when no Secret is configured. */}}
{{- define "tether.gitCredentials" -}}
{{- $c := .Values.git.credentials -}}
{{- $creds := dict -}}
{{- if $c.existingSecret -}}
{{- if not (or $c.tokenKey $c.passwordKey $c.sshKeyKey) -}}
{{- fail "git.credentials.existingSecret is set: name at least one of tokenKey, passwordKey, sshKeyKey" -}}
{{- end -}}
{{- $dir := printf "%s/git" (include "tether.configDir" .) -}}
{{- if $c.username }}{{ $_ := set $creds "username" $c.username }}{{ end -}}
{{- if $c.tokenKey }}{{ $_ := set $creds "tokenFile" (printf "%s/token" $dir) }}{{ end -}}
{{- if $c.passwordKey }}{{ $_ := set $creds "passwordFile" (printf "%s/password" $dir) }}{{ end -}}
{{- if $c.sshKeyKey }}{{ $_ := set $creds "sshKeyFile" (printf "%s/ssh-key" $dir) }}{{ end -}}
{{- if $c.knownHostsKey }}{{ $_ := set $creds "knownHostsFile" (printf "%s/known_hosts" $dir) }}{{ end -}}
{{- end -}}
{{- toJson $creds -}}
{{- end -}}

{{/* The tether config file: .Values.config with the fields the chart owns set (see
values.yaml, `config`). */}}
{{- define "tether.config" -}}
{{- $config := deepCopy (.Values.config | default dict) -}}
{{- $server := deepCopy ($config.server | default dict) -}}
{{- if and $server.listen (ne (toString $server.listen) (printf "0.0.0.0:%s" (include "tether.httpPort" .))) -}}
{{- fail (printf "config.server.listen is set by the chart (0.0.0.0:%s): the probes and the Service depend on it" (include "tether.httpPort" .)) -}}
{{- end -}}
{{- $_ := set $server "listen" (printf "0.0.0.0:%s" (include "tether.httpPort" .)) -}}
{{- $webhooks := deepCopy ($server.webhooks | default dict) -}}
{{- $providers := splitList " " (include "tether.webhookProviders" .) -}}
{{- range $provider, $ref := .Values.webhookSecrets -}}
{{- if not (has $provider $providers) -}}
{{- fail (printf "webhookSecrets.%s: unknown provider (one of %s)" $provider (join ", " $providers)) -}}
{{- end -}}
{{- if not $ref.existingSecret -}}
{{- fail (printf "webhookSecrets.%s.existingSecret is required: secrets are taken from existing Secrets, never inlined" $provider) -}}
{{- end -}}
{{- $key := include "tether.webhookKey" (list $provider $ref) -}}
{{- $_ := set $webhooks $provider (dict "secretFile" (printf "%s/webhooks/%s/%s" (include "tether.configDir" $) $provider $key)) -}}
{{- end -}}
{{- if $webhooks }}{{ $_ := set $server "webhooks" $webhooks }}{{ end -}}
{{- if hasKey .Values.apiToken "value" -}}
{{- fail "apiToken.value: the token is never inlined; name an existingSecret, or let the chart generate one" -}}
{{- end -}}
{{- if include "tether.apiTokenSecret" . -}}
{{- $_ := set $server "apiToken" (dict "secretFile" (printf "%s/api/%s" (include "tether.configDir" $) (include "tether.apiTokenKey" $))) -}}
{{- else if not $server.insecureOpenAPI -}}
{{- fail "apiToken: without existingSecret or generate: true the status API has no token, and tether refuses to serve it on the pod's address; set config.server.insecureOpenAPI: true to serve it open on a trusted network" -}}
{{- end -}}
{{- if hasKey $server "peerToken" -}}
{{- fail "config.server.peerToken is set by the chart (a generated Secret, with shards above 1): set shards" -}}
{{- end -}}
{{- if include "tether.peerTokenSecret" . -}}
{{- $_ := set $server "peerToken" (dict "secretFile" (printf "%s/peer/token" (include "tether.configDir" $))) -}}
{{- end -}}
{{- if hasKey $server "shutdownTimeout" -}}
{{- fail "config.server.shutdownTimeout is set by the chart (terminationGracePeriodSeconds less 5s): set terminationGracePeriodSeconds" -}}
{{- end -}}
{{- $_ := set $server "shutdownTimeout" (include "tether.shutdownTimeout" .) -}}
{{- if and .Values.tenants.defaultServiceAccount (not $server.defaultServiceAccount) -}}
{{- $_ := set $server "defaultServiceAccount" .Values.tenants.defaultServiceAccount -}}
{{- end -}}
{{- $_ := set $config "server" $server -}}
{{- if not $config.inventoryNamespace }}{{ $_ := set $config "inventoryNamespace" .Release.Namespace }}{{ end -}}
{{- $election := deepCopy ($config.leaderElection | default dict) -}}
{{- $_ := set $election "enabled" (.Values.leaderElection.enabled | default false) -}}
{{- if .Values.leaderElection.enabled -}}
{{- $_ := set $election "namespace" .Release.Namespace -}}
{{- $_ := set $election "leaseName" (include "tether.fullname" .) -}}
{{- end -}}
{{- if hasKey $config "shards" -}}
{{- fail "config.shards is set by the chart: set shards" -}}
{{- end -}}
{{- if gt (int .Values.shards) 1 -}}
{{- $_ := set $election "namespace" .Release.Namespace -}}
{{- $_ := set $config "shards" (int .Values.shards) -}}
{{- end -}}
{{- $_ := set $config "leaderElection" $election -}}
{{- $creds := include "tether.gitCredentials" . | fromJson -}}
{{- if and $creds .Values.git.credentials.applyToApps -}}
{{- $apps := list -}}
{{- range $app := ($config.apps | default list) -}}
{{- $app := deepCopy $app -}}
{{- $source := $app.source | default dict -}}
{{- if not $source.credentials }}{{ $_ := set $source "credentials" (deepCopy $creds) }}{{ end -}}
{{- $_ := set $app "source" $source -}}
{{- $apps = append $apps $app -}}
{{- end -}}
{{- $_ := set $config "apps" $apps -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/*
tether's own rights besides its state and App objects: every right with
rbac.singleTeam, else rbac.rules (reads by default); and always `impersonate` on
ServiceAccounts, which every App acts as.
*/}}
{{- define "tether.ownRules" -}}
{{- if .Values.rbac.singleTeam }}
  - apiGroups: ["*"]
    resources: ["*"]
    verbs: ["*"]
{{- else }}
{{- toYaml .Values.rbac.rules | nindent 2 }}
{{- end }}
  - apiGroups: [""]
    resources: [serviceaccounts]
    verbs: [impersonate]
{{- end }}

{{/*
People and permissions (docs/access.md): the API asks the cluster who a bearer token
is (TokenReview) and what they may do (SubjectAccessReview), as the built-in
system:auth-delegator allows, and records each action as an Event on its App.
Cluster-scoped reviews: only the ClusterRole grants them.
*/}}
{{- define "tether.peopleRules" }}
  - apiGroups: [authentication.k8s.io]
    resources: [tokenreviews]
    verbs: [create]
  - apiGroups: [authorization.k8s.io]
    resources: [subjectaccessreviews]
    verbs: [create]
  - apiGroups: [events.k8s.io]
    resources: [events]
    verbs: [create]
{{- end }}

{{/*
What `tether serve` needs for App objects (apps.tether.dev, the chart's crds/), unless
config.server.apps.enabled is false: read and watch them, hold them with its finalizer,
write their status; create and delete the Apps AppSets generate, and write AppSets'
status (reading AppSets and cluster Secrets is in rbac.rules' get/list/watch). With rbac.scope namespaced, set config.server.apps.namespaces to
rbac.namespaces so the watch asks only where it may.
*/}}
{{- define "tether.appObjectRules" -}}
{{- if dig "server" "apps" "enabled" true (.Values.config | default dict) }}
  - apiGroups: [tether.dev]
    resources: [apps]
    verbs: [get, list, watch, patch, update, create, delete]
  - apiGroups: [tether.dev]
    resources: [apps/status]
    verbs: [get, patch, update]
  - apiGroups: [tether.dev]
    resources: [appsets/status]
    verbs: [get, patch, update]
{{- end }}
{{- end }}

{{/*
Until the App CRD is served, `tether serve` watches that one CRD (no polling). A
cluster-scoped right, so only the ClusterRole grants it; with rbac.scope namespaced,
tether asks discovery every 15 s instead (or set config.server.apps.enabled: false).
*/}}
{{- define "tether.appCrdRule" -}}
{{- if dig "server" "apps" "enabled" true (.Values.config | default dict) }}
  - apiGroups: [apiextensions.k8s.io]
    resources: [customresourcedefinitions]
    resourceNames: [apps.tether.dev, appsets.tether.dev]
    verbs: [get, list, watch]
{{- end }}
{{- end }}
