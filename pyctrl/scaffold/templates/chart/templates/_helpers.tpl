{{- define "operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "operator.fullname" -}}
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

{{- define "operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* files/webhook.yaml (pyctrl generate): the webhook configurations and whether a kind converts. */}}
{{- define "operator.webhooks" -}}
{{- .Files.Get "files/webhook.yaml" | fromYaml | toYaml }}
{{- end }}

{{/* "true" when the operator serves webhooks in this release. */}}
{{- define "operator.webhooksServed" -}}
{{- $w := include "operator.webhooks" . | fromYaml }}
{{- if and .Values.webhook.enabled (or $w.configurations $w.conversion) }}true{{ end }}
{{- end }}

{{/* The webhook Service: a fixed name, which the CRDs' conversion webhook (crds/) names too. */}}
{{- define "operator.webhookService" -}}
{{- printf "%s-webhook-service" .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
