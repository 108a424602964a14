{{/* Names. */}}
{{- define "nhc.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "nhc.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "nhc.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "nhc.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "nhc.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "nhc.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: medik8s
{{- end }}

{{- define "nhc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nhc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "nhc.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "nhc.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "nhc.webhookService" -}}{{ include "nhc.fullname" . }}-webhook{{- end }}
{{- define "nhc.webhookSecret" -}}{{ include "nhc.fullname" . }}-webhook-cert{{- end }}
{{- define "nhc.certificate" -}}{{ include "nhc.fullname" . }}-webhook{{- end }}
{{- define "nhc.mutatingWebhook" -}}{{ include "nhc.fullname" . }}-mutating{{- end }}
{{- define "nhc.validatingWebhook" -}}{{ include "nhc.fullname" . }}-validating{{- end }}
{{/* The operator manages its webhook certificate itself (no cert-manager). */}}
{{- define "nhc.selfManagedCerts" -}}
{{- if and .Values.webhooks.enabled (not .Values.certManager.enabled) }}true{{ end }}
{{- end }}

{{- define "nhc.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- if .Values.image.digest }}@{{ .Values.image.digest }}{{ end }}
{{- end }}

{{/*
nhc.validate fails the render on contradictory values, with a message that says what to change.
*/}}
{{- define "nhc.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicaCount > 1 needs leaderElection.enabled=true: without it every replica would remediate" }}
{{- end }}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.enabled) }}
{{- fail "metrics.serviceMonitor.enabled=true needs metrics.enabled=true" }}
{{- end }}
{{- if and .Values.metrics.prometheusRule.enabled (not .Values.metrics.enabled) }}
{{- fail "metrics.prometheusRule.enabled=true needs metrics.enabled=true" }}
{{- end }}
{{- if and .Values.podDisruptionBudget.enabled (lt (int .Values.replicaCount) 2) }}
{{- fail "podDisruptionBudget.enabled=true needs replicaCount >= 2: a budget of one replica blocks node drains" }}
{{- end }}
{{- if and .Values.defaultNodeHealthCheck.enabled (not .Values.crds.enabled) }}
{{- if not (.Capabilities.APIVersions.Has "remediation.medik8s.io/v1alpha1/NodeHealthCheck") }}
{{- fail "defaultNodeHealthCheck.enabled=true needs the NodeHealthCheck CRD: set crds.enabled=true or install it first" }}
{{- end }}
{{- end }}
{{- end }}
