{{/* The chart's name, for labels. */}}
{{- define "loop-plugins.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every name: the release name, with the chart's name unless it has it. */}}
{{- define "loop-plugins.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of the pods of this release: the Deployment's selector. */}}
{{- define "loop-plugins.selectorLabels" -}}
app.kubernetes.io/name: {{ include "loop-plugins.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of every object of this release. */}}
{{- define "loop-plugins.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "loop-plugins.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: loop-plugins
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The ServiceAccount the controller and the API server run as. */}}
{{- define "loop-plugins.serviceAccountName" -}}
{{- default (include "loop-plugins.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{/* The Lease the controller replicas elect a leader with. */}}
{{- define "loop-plugins.leaseName" -}}
{{- default (printf "%s-controller" (include "loop-plugins.fullname" .)) .Values.leaderElection.leaseName }}
{{- end }}

{{/* The API replicas' fan-out Lease. */}}
{{- define "loop-plugins.fanoutLeaseName" -}}
{{- printf "%s-api" (include "loop-plugins.fullname" .) }}
{{- end }}

{{/* Our image: repository@digest when a digest is given, else repository:tag. */}}
{{- define "loop-plugins.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The API server's Service. */}}
{{- define "loop-plugins.apiServiceName" -}}
{{- printf "%s-api" (include "loop-plugins.fullname" .) }}
{{- end }}

{{/* LOOP_API_URL for plugin pods and CronJobs: HostConfig's apiUrl, else the Service's URL. */}}
{{- define "loop-plugins.apiUrl" -}}
{{- if .Values.hostConfig.apiUrl }}
{{- .Values.hostConfig.apiUrl }}
{{- else }}
{{- printf "http://%s.%s.svc:%v" (include "loop-plugins.apiServiceName" .) .Release.Namespace .Values.service.port }}
{{- end }}
{{- end }}

{{/* The namespaces holding Projects and Channels, as a JSON list: the release namespace when none are given. */}}
{{- define "loop-plugins.projectNamespaces" -}}
{{- if .Values.projectNamespaces }}
{{- toJson (uniq .Values.projectNamespaces) }}
{{- else }}
{{- toJson (list .Release.Namespace) }}
{{- end }}
{{- end }}

{{/* The securityContext of every container: the restricted Pod Security level. */}}
{{- define "loop-plugins.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}
