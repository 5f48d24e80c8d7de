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

{{/* Environment every component needs: Kafka and its security, the registry database, the shared settings. */}}
{{- define "hub.env" -}}
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
- name: HUB_REGISTRY_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.existingSecret }}
      key: {{ .Values.database.urlKey }}
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
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
Where the tables are, for every process that reads or writes them (the loader and the Thrift
server): the warehouse and checkpoints, S3 and its credentials, the metastore, the Spark master.
*/}}
{{- define "hub.tablesEnv" -}}
- name: HUB_LOADER_WAREHOUSE_DIR
  value: {{ .Values.storage.warehouseDir | quote }}
- name: HUB_LOADER_CHECKPOINT_DIR
  value: {{ .Values.storage.checkpointDir | quote }}
- name: HUB_LOADER_MASTER
  value: {{ .Values.spark.master | quote }}
{{- with .Values.storage.s3 }}
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
{{- if .existingSecret }}
- name: HUB_LOADER_S3_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .accessKeyKey }}
- name: HUB_LOADER_S3_SECRET_KEY_FILE
  value: /etc/hub/s3/{{ .secretKeyKey }}
{{- end }}
{{- end }}
{{- with .Values.metastore }}
{{- if .uris }}
- name: HUB_LOADER_METASTORE_URIS
  value: {{ .uris | quote }}
{{- else if .jdbcUrl }}
- name: HUB_LOADER_METASTORE_URL
  value: {{ .jdbcUrl | quote }}
{{- if .existingSecret }}
- name: HUB_LOADER_METASTORE_USER
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .userKey }}
- name: HUB_LOADER_METASTORE_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .passwordKey }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "hub.tablesMounts" -}}
{{- if .Values.storage.s3.existingSecret }}
- name: s3
  mountPath: /etc/hub/s3
  readOnly: true
{{- end }}
{{- if .Values.storage.volume.enabled }}
- name: data
  mountPath: /data
{{- end }}
{{- end -}}

{{- define "hub.tablesVolumes" -}}
{{- if .Values.storage.s3.existingSecret }}
- name: s3
  secret:
    secretName: {{ .Values.storage.s3.existingSecret }}
    defaultMode: 0440
    items:
      - key: {{ .Values.storage.s3.secretKeyKey }}
        path: {{ .Values.storage.s3.secretKeyKey }}
{{- end }}
{{- if .Values.storage.volume.enabled }}
- name: data
  persistentVolumeClaim:
    claimName: {{ include "hub.fullname" . }}-data
{{- end }}
{{- end -}}

{{/* A component's own non-secret settings, from a map of HUB_ variables. */}}
{{- define "hub.componentEnv" -}}
{{- range $name, $value := . }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}
