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

{{- /* Every object's labels: the chart's, and commonLabels where they name other keys. */ -}}
{{- define "nhc.labels" -}}
{{- $own := dict "helm.sh/chart" (printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_") "app.kubernetes.io/version" .Chart.AppVersion "app.kubernetes.io/managed-by" .Release.Service "app.kubernetes.io/part-of" "medik8s" }}
{{- $own = merge $own (include "nhc.selectorLabels" . | fromYaml) }}
{{- toYaml (merge $own (deepCopy (default dict .Values.commonLabels))) }}
{{- end }}

{{- /*
nhc.annotations is an object's annotations block, on a line of its own under metadata: its own (a
dict) and commonAnnotations where they name other keys; nothing when both are empty. Called with
(list $ $own) right after the previous line of metadata.
*/ -}}
{{- define "nhc.annotations" -}}
{{- $ := index . 0 }}
{{- $all := merge (deepCopy (index . 1)) (deepCopy (default dict $.Values.commonAnnotations)) }}
{{- with $all }}
  annotations:
    {{- toYaml . | nindent 4 }}
{{- end }}
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
{{/* The ConfigMap the operator publishes its settings in (--settings-configmap). */}}
{{- define "nhc.settingsConfigMap" -}}{{ include "nhc.fullname" . }}-settings{{- end }}
{{- define "nhc.certificate" -}}{{ include "nhc.fullname" . }}-webhook{{- end }}
{{- define "nhc.selfSignedIssuer" -}}{{ include "nhc.fullname" . }}-selfsigned{{- end }}
{{/* The chart's CA (cert-manager without issuerRef): its Certificate, its Secret and its Issuer. */}}
{{- define "nhc.ca" -}}{{ include "nhc.fullname" . }}-webhook-ca{{- end }}
{{- define "nhc.mutatingWebhook" -}}{{ include "nhc.fullname" . }}-mutating{{- end }}
{{- define "nhc.validatingWebhook" -}}{{ include "nhc.fullname" . }}-validating{{- end }}
{{/*
nhc.certManager is "true" when cert-manager issues the webhook certificate: certManager.enabled is
true, or auto and the cluster serves cert-manager.io/v1. (toString: the value is a boolean or "auto",
and eq refuses to compare a boolean with a string.)
*/}}
{{- define "nhc.certManager" -}}
{{- $enabled := toString .Values.certManager.enabled }}
{{- if and .Values.webhooks.enabled (or (eq $enabled "true") (and (eq $enabled "auto") (.Capabilities.APIVersions.Has "cert-manager.io/v1"))) }}true{{ end }}
{{- end }}
{{/* The operator manages its webhook certificate itself (no cert-manager). */}}
{{- define "nhc.selfManagedCerts" -}}
{{- if and .Values.webhooks.enabled (not (include "nhc.certManager" .)) }}true{{ end }}
{{- end }}
{{/*
nhc.monitoring is "true" when the Prometheus-operator object of the kind is created: its value is
true, or auto and the cluster serves the kind, and metrics are on (nhc.validate refuses true without
them). Called with (list $ "ServiceMonitor" .Values.metrics.serviceMonitor.enabled).
*/}}
{{- define "nhc.monitoring" -}}
{{- $ := index . 0 }}
{{- $enabled := toString (index . 2) }}
{{- if and $.Values.metrics.enabled (or (eq $enabled "true") (and (eq $enabled "auto") ($.Capabilities.APIVersions.Has (printf "monitoring.coreos.com/v1/%s" (index . 1))))) }}true{{ end }}
{{- end }}

{{/*
nhc.scrapeKind is the kind of the object that tells Prometheus to scrape the operator: PodMonitor
with metrics.podMonitor.enabled, else ServiceMonitor when nhc.monitoring says so, else empty.
*/}}
{{- define "nhc.scrapeKind" -}}
{{- if and .Values.metrics.enabled .Values.metrics.podMonitor.enabled }}PodMonitor
{{- else if not .Values.metrics.podMonitor.enabled }}{{ if include "nhc.monitoring" (list . "ServiceMonitor" .Values.metrics.serviceMonitor.enabled) }}ServiceMonitor{{ end }}
{{- end }}
{{- end }}
{{/* The ServiceAccount Prometheus scrapes with, when the chart makes its token Secret. */}}
{{- define "nhc.scraperServiceAccount" -}}
{{- default (printf "%s-metrics-scraper" (include "nhc.fullname" .)) .Values.metrics.serviceMonitor.authorization.serviceAccount.name }}
{{- end }}
{{/* The Secret key selector of the scrape token: the one set, else the chart's token Secret. */}}
{{- define "nhc.scrapeTokenSecret" -}}
{{- $secret := .Values.metrics.serviceMonitor.authorization.secret }}
{{- if $secret.name }}
name: {{ $secret.name }}
key: {{ default "token" $secret.key }}
{{- else }}
name: {{ include "nhc.scraperServiceAccount" . }}-token
key: token
{{- end }}
{{- end }}

{{/*
nhc.alertLabels are an alert's labels: its severity and metrics.prometheusRule.ruleLabels (for
Alertmanager's routes; they may not set severity). Called with (list $rule "warning").
*/}}
{{- define "nhc.alertLabels" -}}
{{- toYaml (merge (dict "severity" (index . 1)) (omit (index . 0).ruleLabels "severity")) }}
{{- end }}

{{/*
nhc.seconds is the whole seconds of a Go duration ("1h": 3600), for PromQL comparisons, which take
numbers: mustDateModify adds the duration to a time with time.ParseDuration (a bad duration fails the
render), and the difference of the two Unix times is the duration.
*/}}
{{- define "nhc.seconds" -}}
{{- $t := toDate "2006-01-02" "2000-01-01" }}
{{- sub (unixEpoch (mustDateModify . $t)) (unixEpoch $t) }}
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
{{- if and (eq (toString .Values.metrics.serviceMonitor.enabled) "true") (not .Values.metrics.enabled) }}
{{- fail "metrics.serviceMonitor.enabled=true needs metrics.enabled=true" }}
{{- end }}
{{- if and .Values.metrics.podMonitor.enabled (not .Values.metrics.enabled) }}
{{- fail "metrics.podMonitor.enabled=true needs metrics.enabled=true" }}
{{- end }}
{{- if and .Values.metrics.podMonitor.enabled (eq (toString .Values.metrics.serviceMonitor.enabled) "true") }}
{{- fail "metrics.podMonitor.enabled=true and metrics.serviceMonitor.enabled=true: Prometheus would scrape the operator twice; set serviceMonitor.enabled to auto or false (the PodMonitor takes the serviceMonitor settings)" }}
{{- end }}
{{- if and (eq (toString .Values.metrics.prometheusRule.enabled) "true") (not .Values.metrics.enabled) }}
{{- fail "metrics.prometheusRule.enabled=true needs metrics.enabled=true" }}
{{- end }}
{{- if and .Values.metrics.grafanaDashboard.enabled (not .Values.metrics.enabled) }}
{{- fail "metrics.grafanaDashboard.enabled=true needs metrics.enabled=true: the dashboard shows the operator's metrics" }}
{{- end }}
{{- if and .Values.webhooks.enabled .Values.certManager.issuerRef (not (include "nhc.certManager" .)) }}
{{- fail "certManager.issuerRef needs cert-manager, but certManager.enabled is false, or auto and the cluster does not serve cert-manager.io/v1 (helm template: --api-versions cert-manager.io/v1)" }}
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

{{- /*
The release's identity, "<namespace>.<release>": the managers label the node Leases they create
with it (nodehealthcheck.medik8s.io/release), and the uninstall hook deletes only the node Leases
labelled with it, so another release (or the public operator) sharing leases.namespace keeps its
own. A label value: one longer than 63 characters is cut to 52 and ends in a hash of the whole.
*/ -}}
{{- define "nhc.releaseIdentity" -}}
{{- $id := printf "%s.%s" .Release.Namespace .Release.Name -}}
{{- if gt (len $id) 63 -}}
{{- printf "%s-%s" (trunc 52 $id) (sha256sum $id | trunc 10) -}}
{{- else -}}
{{- $id -}}
{{- end -}}
{{- end }}
