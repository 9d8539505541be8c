{{/* The release's name, shortened to what Kubernetes names allow. */}}
{{- define "karpool.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "karpool.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "karpool.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "karpool.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "karpool.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karpool.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "karpool.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "karpool.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Metadata annotations, with their leading newline, or nothing. */}}
{{- define "karpool.annotations" -}}
{{- with .Values.additionalAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
{{- end }}
{{- end }}

{{- define "karpool.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "karpool.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "karpool.image" -}}
{{- $tag := default .Chart.AppVersion .Values.controller.image.tag }}
{{- if .Values.controller.image.digest }}
{{- printf "%s:%s@%s" .Values.controller.image.repository $tag .Values.controller.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.controller.image.repository $tag }}
{{- end }}
{{- end }}
