{{/* Names and labels shared by every object of the release. */}}
{{- define "hub.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hub.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "hub.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
Annotations by which a Prometheus that discovers pods scrapes one: `port` serves /metrics.
Empty when metrics.scrapeAnnotations is off.
*/}}
{{- define "hub.scrapeAnnotations" -}}
{{- if .root.Values.metrics.scrapeAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}

{{- define "hub.image" -}}
image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
imagePullPolicy: {{ .Values.image.pullPolicy }}
{{- end -}}

{{/*
The pod's security: the image's non-root user (uid 10001), the runtime's default seccomp
profile, and volumes writable by that user's group.
*/}}
{{- define "hub.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  fsGroup: 10001
  seccompProfile:
    type: RuntimeDefault
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
Each container's security: a read-only root filesystem, no privilege escalation, no Linux
capabilities. What a process writes goes to the emptyDir volumes of "hub.scratchVolumes".
*/}}
{{- define "hub.containerSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  privileged: false
  capabilities:
    drop: ["ALL"]
{{- end -}}

{{/* The writable places of a container: /tmp (Spark's scratch, the JVM) and HUB_HOME. */}}
{{- define "hub.scratchMounts" -}}
- name: tmp
  mountPath: /tmp
- name: hub-home
  mountPath: /var/lib/hub
{{- end -}}

{{- define "hub.scratchVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.scratch.tmpSize }}
- name: hub-home
  emptyDir:
    sizeLimit: {{ .Values.scratch.homeSize }}
{{- end -}}

{{/*
Seconds a pod may take to stop: longer than the publish delivery timeout, so that records a
pod accepted are delivered (or reported failed) before Kubernetes kills it.
*/}}
{{- define "hub.terminationGrace" -}}
{{- add (div (add .Values.kafka.deliveryTimeoutMs 999) 1000) .Values.terminationGraceMarginSeconds -}}
{{- end -}}

{{/*
Where Kafka is and how to log in, for the pods that talk to it (the API, the connectors, the
loader); the secrets themselves are the files of "hub.kafkaMounts".
*/}}
{{- define "hub.kafkaEnv" -}}
- name: HUB_KAFKA_BOOTSTRAP_SERVERS
  value: {{ .Values.kafka.bootstrapServers | quote }}
- name: HUB_KAFKA_DELIVERY_TIMEOUT_MS
  value: {{ .Values.kafka.deliveryTimeoutMs | quote }}
- name: HUB_KAFKA_SECURITY_PROTOCOL
  value: {{ .Values.kafka.securityProtocol | quote }}
{{- if .Values.kafka.sasl.existingSecret }}
- name: HUB_KAFKA_SASL_MECHANISM
  value: {{ .Values.kafka.sasl.mechanism | quote }}
- name: HUB_KAFKA_SASL_USERNAME
  value: {{ required "kafka.sasl.username is required with kafka.sasl.existingSecret" .Values.kafka.sasl.username | quote }}
- name: HUB_KAFKA_SASL_PASSWORD_FILE
  value: /etc/hub/kafka/sasl/{{ .Values.kafka.sasl.passwordKey }}
{{- end }}
{{- if .Values.kafka.tls.existingSecret }}
- name: HUB_KAFKA_SSL_CA_LOCATION
  value: /etc/hub/kafka/tls/{{ .Values.kafka.tls.caKey }}
{{- if .Values.kafka.tls.certificateKey }}
- name: HUB_KAFKA_SSL_CERTIFICATE_LOCATION
  value: /etc/hub/kafka/tls/{{ .Values.kafka.tls.certificateKey }}
- name: HUB_KAFKA_SSL_KEY_LOCATION
  value: /etc/hub/kafka/tls/{{ .Values.kafka.tls.privateKeyKey }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The registry and catalog database's URL (it holds the password), only for the pods that open
that database: the API, the connectors and the migrations Job. The loader reads schemas
through the API with its key; the Thrift server reads no registry at all.
*/}}
{{- define "hub.databaseEnv" -}}
- name: HUB_REGISTRY_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.existingSecret }}
      key: {{ .Values.database.urlKey }}
{{- end -}}

{{/* The settings every component shares (`env`, never a secret). */}}
{{- define "hub.sharedEnv" -}}
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{/*
The loader's Spark master. Only a loader on a `k8s://` master gets a service-account token,
to ask for its executor pods; every other pod runs without one
(automountServiceAccountToken: false), so nothing that runs in it can call the Kubernetes API.
*/}}
{{- define "hub.loaderMaster" -}}
{{- get (.Values.loader.env | default dict) "HUB_LOADER_MASTER" | default .Values.spark.master -}}
{{- end -}}

{{/* The Kafka secrets, mounted as files (never as environment variables). */}}
{{- define "hub.kafkaMounts" -}}
{{- if .Values.kafka.sasl.existingSecret }}
- name: kafka-sasl
  mountPath: /etc/hub/kafka/sasl
  readOnly: true
{{- end }}
{{- if .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  mountPath: /etc/hub/kafka/tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "hub.kafkaVolumes" -}}
{{- if .Values.kafka.sasl.existingSecret }}
- name: kafka-sasl
  secret:
    secretName: {{ .Values.kafka.sasl.existingSecret }}
    defaultMode: 0440
{{- end }}
{{- if .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  secret:
    secretName: {{ .Values.kafka.tls.existingSecret }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{/*
Where the tables are, for the two processes that use them, called with (dict "root" $
"reader" bool): the loader writes them (the warehouse, its checkpoints, the S3 and metastore
credentials of storage.s3.existingSecret and metastore.existingSecret); the Thrift server
(reader) only reads them, with the read-only credentials of storage.s3.readOnlySecret and
metastore.readOnlySecret, and knows nothing of the checkpoints.
*/}}
{{- define "hub.tablesEnv" -}}
{{- $values := .root.Values }}
{{- $s3Secret := ternary $values.storage.s3.readOnlySecret $values.storage.s3.existingSecret .reader }}
{{- $metastoreSecret := ternary $values.metastore.readOnlySecret $values.metastore.existingSecret .reader }}
- name: HUB_LOADER_WAREHOUSE_DIR
  value: {{ $values.storage.warehouseDir | quote }}
{{- if not .reader }}
- name: HUB_LOADER_CHECKPOINT_DIR
  value: {{ $values.storage.checkpointDir | quote }}
{{- end }}
- name: HUB_LOADER_MASTER
  value: {{ $values.spark.master | quote }}
{{- with $values.storage.s3 }}
{{- if .endpoint }}
- name: HUB_LOADER_S3_ENDPOINT
  value: {{ .endpoint | quote }}
{{- end }}
{{- if .region }}
- name: HUB_LOADER_S3_REGION
  value: {{ .region | quote }}
{{- end }}
- name: HUB_LOADER_S3_PATH_STYLE_ACCESS
  value: {{ .pathStyleAccess | quote }}
{{- if $s3Secret }}
- name: HUB_LOADER_S3_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $s3Secret }}
      key: {{ .accessKeyKey }}
- name: HUB_LOADER_S3_SECRET_KEY_FILE
  value: /etc/hub/s3/{{ .secretKeyKey }}
{{- end }}
{{- end }}
{{- with $values.metastore }}
{{- if .uris }}
- name: HUB_LOADER_METASTORE_URIS
  value: {{ .uris | quote }}
{{- else if .jdbcUrl }}
- name: HUB_LOADER_METASTORE_URL
  value: {{ .jdbcUrl | quote }}
{{- if $metastoreSecret }}
- name: HUB_LOADER_METASTORE_USER
  valueFrom:
    secretKeyRef:
      name: {{ $metastoreSecret }}
      key: {{ .userKey }}
- name: HUB_LOADER_METASTORE_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $metastoreSecret }}
      key: {{ .passwordKey }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The tables' files and S3 secret key; read-only for the reader (dict "root" "reader"). */}}
{{- define "hub.tablesMounts" -}}
{{- $values := .root.Values }}
{{- if ternary $values.storage.s3.readOnlySecret $values.storage.s3.existingSecret .reader }}
- name: s3
  mountPath: /etc/hub/s3
  readOnly: true
{{- end }}
{{- if $values.storage.volume.enabled }}
- name: data
  mountPath: /data
  {{- if .reader }}
  readOnly: true
  {{- end }}
{{- end }}
{{- end -}}

{{- define "hub.tablesVolumes" -}}
{{- $values := .root.Values }}
{{- $s3Secret := ternary $values.storage.s3.readOnlySecret $values.storage.s3.existingSecret .reader }}
{{- if $s3Secret }}
- name: s3
  secret:
    secretName: {{ $s3Secret }}
    defaultMode: 0440
    items:
      - key: {{ $values.storage.s3.secretKeyKey }}
        path: {{ $values.storage.s3.secretKeyKey }}
{{- end }}
{{- if $values.storage.volume.enabled }}
- name: data
  persistentVolumeClaim:
    claimName: {{ include "hub.fullname" .root }}-data
    {{- if .reader }}
    readOnly: true
    {{- end }}
{{- end }}
{{- end -}}

{{/* A component's own non-secret settings, from a map of HUB_ variables. */}}
{{- define "hub.componentEnv" -}}
{{- range $name, $value := . }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}
