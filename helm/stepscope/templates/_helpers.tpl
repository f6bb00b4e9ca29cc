{{/* Chart name. */}}
{{- define "stepscope.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object-name prefix. */}}
{{- define "stepscope.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "stepscope.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "stepscope.selectorLabels" -}}
app.kubernetes.io/name: {{ include "stepscope.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "stepscope.labels" -}}
helm.sh/chart: {{ include "stepscope.chart" . }}
{{ include "stepscope.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: stepscope
{{- end }}

{{- define "stepscope.operatorServiceAccount" -}}
{{- default (printf "%s-operator" (include "stepscope.fullname" .)) .Values.serviceAccounts.operator.name }}
{{- end }}

{{- define "stepscope.tokenSecret" -}}
{{- default (printf "%s-sidecar-token" (include "stepscope.fullname" .)) .Values.sidecar.token.secretName }}
{{- end }}

{{/* The Secret (release namespace) with the master token the operator derives each namespace's token from. */}}
{{- define "stepscope.masterTokenSecret" -}}
{{- if .Values.sidecar.token.existingSecret }}
{{- .Values.sidecar.token.existingSecret }}
{{- else }}
{{- printf "%s-sidecar-master" (include "stepscope.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* Whether the operator makes the master token itself (no sidecar.token.value, no existingSecret): a render then
holds no secret (runtime_secrets.py). */}}
{{- define "stepscope.runtimeMaster" -}}
{{- if not (or .Values.sidecar.token.value .Values.sidecar.token.existingSecret) }}true{{ end }}
{{- end }}

{{/* Whether the operator makes the webhook's certificate itself and sets the caBundle (neither cert-manager nor an
existing Secret). */}}
{{- define "stepscope.runtimeTLS" -}}
{{- if and .Values.webhook.enabled (not .Values.webhook.certManager.enabled) (not .Values.webhook.existingSecret) }}true{{ end }}
{{- end }}

{{- define "stepscope.webhookConfiguration" -}}
{{- printf "%s-sidecar-injector" (include "stepscope.fullname" .) }}
{{- end }}

{{/* The storage base sessions must use (spec.storage.uri) and injected sidecars upload under; empty without a bucket. */}}
{{- define "stepscope.storageBase" -}}
{{- with .Values.storage.bucket }}
{{- $prefix := trimAll "/" $.Values.storage.prefix }}
{{- printf "%s://%s%s" $.Values.storage.scheme . (ternary "" (printf "/%s" $prefix) (eq $prefix "")) }}
{{- end }}
{{- end }}

{{- define "stepscope.webhookService" -}}
{{- printf "%s-webhook" (include "stepscope.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "stepscope.webhookSecret" -}}
{{- .Values.webhook.existingSecret | default (printf "%s-webhook-tls" (include "stepscope.fullname" .)) }}
{{- end }}

{{/* Namespaces whose token Secret the operator writes at start: the training namespaces when the master comes from
an existing Secret or is made by the operator (a render cannot derive their tokens), else none. */}}
{{- define "stepscope.operatorWrittenTokens" -}}
{{- if or .Values.sidecar.token.existingSecret (not .Values.sidecar.token.value) }}
{{- include "stepscope.trainingNamespaces" . | fromJsonArray | join "," }}
{{- end }}
{{- end }}

{{/* image: <repository>:<tag or appVersion>. Call with (list $ .Values.images.x). */}}
{{- define "stepscope.image" -}}
{{- $root := index . 0 }}
{{- $image := index . 1 }}
{{- printf "%s:%s" $image.repository (default $root.Chart.AppVersion $image.tag) }}
{{- end }}

{{/* Training namespaces as a JSON list: trainingNamespaces, else watchNamespaces, else the release namespace. */}}
{{- define "stepscope.trainingNamespaces" -}}
{{- $ns := .Values.trainingNamespaces }}
{{- if not $ns }}{{ $ns = .Values.operator.watchNamespaces }}{{ end }}
{{- if not $ns }}{{ $ns = list .Release.Namespace }}{{ end }}
{{- $ns | uniq | toJson }}
{{- end }}

{{/* namespaceSelector terms restricting the webhook to watched namespaces (none when cluster-wide). */}}
{{- define "stepscope.watchedNamespaceTerms" -}}
{{- with .Values.operator.watchNamespaces }}
- key: kubernetes.io/metadata.name
  operator: In
  values: {{ toJson . }}
{{- end }}
{{- end }}

{{- /*
Exactly what the operator's requests need (tests/e2e/test_rbac_traffic.py checks real traffic against these rules).
kopf discovers the CRD once at startup through discovery (scanning disabled), so nothing cluster-wide is needed.
*/ -}}
{{- define "stepscope.operatorRules" -}}
# ProfileSessions: watched by kopf, patched for its progress annotations, the accepted spec and the finalizer;
# created by ProfileTriggers when they fire and deleted beyond their history limits.
- apiGroups: ["stepscope.dev"]
  resources: ["profilesessions"]
  verbs: ["get", "list", "watch", "patch", "create", "delete"]
- apiGroups: ["stepscope.dev"]
  resources: ["profilesessions/status"]
  verbs: ["patch"]
# Never a request: the OwnerReferencesPermissionEnforcement admission plugin checks it when the operator creates an
# analyzer Job owned by a session (blockOwnerDeletion).
- apiGroups: ["stepscope.dev"]
  resources: ["profilesessions/finalizers"]
  verbs: ["update"]
# ProfileTriggers: watched by kopf (and patched for its finalizer), their status written at each evaluation.
- apiGroups: ["stepscope.dev"]
  resources: ["profiletriggers"]
  verbs: ["list", "watch", "patch"]
- apiGroups: ["stepscope.dev"]
  resources: ["profiletriggers/status"]
  verbs: ["patch"]
# Never a request: OwnerReferencesPermissionEnforcement checks it when the operator creates a session owned by a
# trigger (blockOwnerDeletion).
- apiGroups: ["stepscope.dev"]
  resources: ["profiletriggers/finalizers"]
  verbs: ["update"]
# Target resolution by label selector.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
# Kubernetes Events for phase transitions and artifact deletion.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
# jobRef targets: a TrainJob (Kubeflow Trainer v2) and the JobSet that runs it, read for the ranks of their pods.
- apiGroups: ["trainer.kubeflow.org"]
  resources: ["trainjobs"]
  verbs: ["get"]
- apiGroups: ["jobset.x-k8s.io"]
  resources: ["jobsets"]
  verbs: ["get"]
{{- end }}

{{/* The analyzer and cleanup Jobs the operator creates and follows in a session's namespace (removed by
ownerReferences or ttlSecondsAfterFinished). */}}
{{- define "stepscope.operatorJobRules" -}}
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["create", "get"]
{{- end }}

{{/* Where a cluster-wide operator may create Jobs: "" for every namespace (no trainingNamespaces listed, or
onboarding.byLabel, whose namespaces are not known at render), else the training namespaces (JSON list). */}}
{{- define "stepscope.jobNamespaces" -}}
{{- if and .Values.trainingNamespaces (not .Values.onboarding.byLabel) }}
{{- include "stepscope.trainingNamespaces" . }}
{{- end }}
{{- end }}

{{/* The install's storage settings, as the operator reads them (STEPSCOPE_STORAGE_*); also the data of the
ConfigMap <fullname>-storage that `stepscope check` reads. BASE and ENDPOINT are the names the sidecar reads too. */}}
{{- define "stepscope.storageSettings" -}}
STEPSCOPE_STORAGE_BASE: {{ include "stepscope.storageBase" . | quote }}
STEPSCOPE_STORAGE_ENDPOINT: {{ .Values.storage.endpoint | quote }}
STEPSCOPE_STORAGE_REGION: {{ .Values.storage.region | quote }}
STEPSCOPE_STORAGE_ADDRESSING_STYLE: {{ .Values.storage.addressingStyle | quote }}
STEPSCOPE_STORAGE_URL_BASE: {{ .Values.storage.urlBase | quote }}
STEPSCOPE_STORAGE_CREDENTIALS_SECRET: {{ .Values.storage.credentialsSecret.name | quote }}
STEPSCOPE_STORAGE_CREDENTIALS_ACCESS_KEY_ID_KEY: {{ .Values.storage.credentialsSecret.accessKeyIdKey | quote }}
STEPSCOPE_STORAGE_CREDENTIALS_SECRET_ACCESS_KEY_KEY: {{ .Values.storage.credentialsSecret.secretAccessKeyKey | quote }}
{{- end }}

{{/* The CIDRs the webhook port is admitted from (JSON list): webhook.networkPolicy.apiServerCIDRs, and with
lookupApiServer the addresses of the `kubernetes` Endpoints in `default` (none under `helm template`). */}}
{{- define "stepscope.apiServerCIDRs" -}}
{{- $cidrs := list }}
{{- range .Values.webhook.networkPolicy.apiServerCIDRs }}
{{- $cidrs = append $cidrs . }}
{{- end }}
{{- if .Values.webhook.networkPolicy.lookupApiServer }}
{{- $endpoints := lookup "v1" "Endpoints" "default" "kubernetes" }}
{{- range (($endpoints | default dict).subsets | default list) }}
{{- range (.addresses | default list) }}
{{- $cidrs = append $cidrs (printf "%s/%s" .ip (ternary "128" "32" (contains ":" .ip))) }}
{{- end }}
{{- end }}
{{- end }}
{{- $cidrs | uniq | toJson }}
{{- end }}
