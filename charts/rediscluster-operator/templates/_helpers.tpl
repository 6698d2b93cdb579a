{{- define "rediscluster-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "rediscluster-operator.fullname" -}}
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

{{- define "rediscluster-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rediscluster-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "rediscluster-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "rediscluster-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "rediscluster-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "rediscluster-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The rules pyctrl.rbacgen generated from the reconcilers (files/role.yaml). */}}
{{- define "rediscluster-operator.rules" -}}
{{- $role := .Files.Get "files/role.yaml" | fromYaml }}
{{- toYaml $role.rules }}
{{- end }}

{{/* pyctrl.rbacgen's leader-election and event rules (files/leader_election_role.yaml). */}}
{{- define "rediscluster-operator.leaderElectionRules" -}}
{{- $role := .Files.Get "files/leader_election_role.yaml" | fromYaml }}
{{- toYaml $role.rules }}
{{- end }}

{{- define "rediscluster-operator.webhookService" -}}
{{- printf "%s-webhook" (include "rediscluster-operator.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* pyctrl.rbacgen's METRICS_AUTH_RULES (files/metrics_auth_role.yaml). */}}
{{- define "rediscluster-operator.metricsAuthRules" -}}
{{- $role := .Files.Get "files/metrics_auth_role.yaml" | fromYaml }}
{{- toYaml $role.rules }}
{{- end }}

{{/* pyctrl.rbacgen's METRICS_READER_RULES (files/metrics_reader_role.yaml). */}}
{{- define "rediscluster-operator.metricsReaderRules" -}}
{{- $role := .Files.Get "files/metrics_reader_role.yaml" | fromYaml }}
{{- toYaml $role.rules }}
{{- end }}

{{/* files/role.yaml's rules on namespaced resources (files/role_namespaced.yaml): the Roles of watchNamespaces. */}}
{{- define "rediscluster-operator.namespacedRules" -}}
{{- $role := .Files.Get "files/role_namespaced.yaml" | fromYaml }}
{{- toYaml $role.rules }}
{{- end }}

{{/* files/role.yaml's rules on cluster-scoped resources (files/role_cluster_scoped.yaml). */}}
{{- define "rediscluster-operator.clusterScopedRules" -}}
{{- $role := .Files.Get "files/role_cluster_scoped.yaml" | fromYaml }}
{{- toYaml $role.rules }}
{{- end }}
