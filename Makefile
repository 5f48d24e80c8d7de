# Integration Hub: `make help` lists the targets.
# `make run` and `make test` work on a fresh machine: they set everything up first.

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HUB_HOME ?= $(CURDIR)/.hub
JARS := $(HUB_HOME)/jars
UV_VERSION := 0.13.9
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PYTEST_ARGS ?=

export HUB_HOME

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: setup
setup: $(VENV)/.installed jdk $(JARS)/.fetched postgres chromium object-store ## Set up everything: venv, JDK and Maven, jars, PostgreSQL, Chromium, S3 server (idempotent)

$(VENV)/.installed: requirements.lock pyproject.toml
	@echo "==> Python environment in $(VENV) (pinned by requirements.lock)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q "uv==$(UV_VERSION)"
	$(BIN)/uv pip install --python $(BIN)/python -r requirements.lock
	$(BIN)/uv pip install --python $(BIN)/python --no-deps -e .
	@touch $@

# The Thrift server's authenticator compiles against the pyspark wheel's jars, hence the venv.
$(JARS)/.fetched: jvm/pom.xml jvm/kafka-broker/pom.xml jvm/spark-connectors/pom.xml jvm/metastore/pom.xml \
		jvm/thrift-auth/pom.xml $(wildcard jvm/thrift-auth/src/main/java/org/integrationhub/thrift/*.java) \
		$(wildcard jvm/thrift-auth/src/main/resources/org/integrationhub/thrift/*) \
		jvm/delta-log-store/pom.xml $(wildcard jvm/delta-log-store/src/main/java/org/integrationhub/delta/*.java) \
		$(VENV)/.installed | jdk
	@echo "==> JVM jars from Maven Central into $(JARS) (Kafka broker; Delta, Kafka and Avro for Spark; S3A for s3a:// tables; Derby metastore server and the PostgreSQL JDBC driver; the Thrift server's authenticator; the Delta log store for local tables)"
	@java -version 2>&1 | head -1
	rm -rf $(JARS)/kafka $(JARS)/spark $(JARS)/s3a $(JARS)/metastore
	mvn -B -ntp -s jvm/settings.xml -f jvm/pom.xml package -Dhub.jars.dir=$(JARS) \
	  -Dpyspark.jars.dir=$$($(BIN)/python -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
	@touch $@

.PHONY: jars
jars: $(JARS)/.fetched ## Fetch the JVM jars (Kafka broker, Delta, spark-sql-kafka, spark-avro); build the Thrift server authenticator and the Delta log store

# A local S3-compatible server (versitygw, posix backend) for tables and checkpoints on s3a://:
# the object-storage tests run it. Built from the Go module proxy at a pinned version, once per
# machine (tools/go_install.sh); a first build takes a few minutes and lists each package.
VERSITYGW_VERSION := v1.8.0
# The stamp names the version, so changing VERSITYGW_VERSION rebuilds it.
VERSITYGW_STAMP := $(HUB_HOME)/bin/.versitygw-$(VERSITYGW_VERSION)

.PHONY: object-store
object-store: $(VERSITYGW_STAMP) ## Build the local S3-compatible server (versitygw) into .hub/bin

$(VERSITYGW_STAMP):
	tools/go_install.sh github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION) $(HUB_HOME)/bin
	@touch $@

# Go for the tools above: the one on PATH when it is 1.21 or later (it fetches the newer
# toolchain a module asks for by itself), else a pinned toolchain from the Go module proxy
# (tools/fetch_go.py), kept under $(HUB_HOME)/go.
.PHONY: go-path
go-path:
	@if command -v go >/dev/null && go version | grep -Eq 'go1\.(2[1-9]|[3-9][0-9])'; then \
	  command -v go; \
	else \
	  $(PYTHON) tools/fetch_go.py $(HUB_HOME)/go; \
	fi

.PHONY: bench-jars
bench-jars: ## Fetch Debezium + Kafka Connect jars for bench/cdc.py (not needed by setup or CI)
	mvn -B -ntp -s jvm/settings.xml -f jvm/debezium/pom.xml package -Dhub.jars.dir=$(JARS)

# bench/publish_single.py loads the server with wrk, a compiled generator that leaves the cores
# to the server it measures.
.PHONY: bench-tools
bench-tools: ## Install wrk from Debian packages when missing (bench/publish_single.py's load)
	@if command -v wrk >/dev/null; then \
	  echo "==> wrk: $$(command -v wrk)"; \
	else \
	  echo "==> wrk: installing the Debian package"; \
	  $(SUDO) apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk; \
	fi

# The container image (image/Containerfile, built by image/build.sh): Debian 12 from mmdebstrap,
# the locked environment, the jars and the hub. Rebuilt when any of its inputs changes.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE ?= localhost/integration-hub:$(VERSION)
IMAGE_STAMP := $(HUB_HOME)/image/.built
PACKAGES := hub_core registry catalog hub_kafka migrations publish connectors hub_api spark_loaders hub_cli

.PHONY: image
image: $(IMAGE_STAMP) ## Build the container image (mmdebstrap + buildah; `IMAGE=` names it)

$(IMAGE_STAMP): image/Containerfile image/build.sh requirements.lock pyproject.toml \
		$(shell find $(PACKAGES) -type f -not -name '*.pyc' 2>/dev/null) \
		$(VENV)/.installed $(JARS)/.fetched | image-tools
	VENV=$(VENV) image/build.sh $(IMAGE)
	@echo "$(IMAGE)" > $@

.PHONY: image-tools
image-tools: ## Install mmdebstrap and buildah from Debian packages when missing
	@if command -v mmdebstrap >/dev/null && command -v buildah >/dev/null; then \
	  echo "==> mmdebstrap $$(mmdebstrap --version | cut -d' ' -f2), $$(buildah --version)"; \
	else \
	  echo "==> mmdebstrap and buildah: installing the Debian packages"; \
	  $(SUDO) apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q mmdebstrap buildah; \
	fi

# What validates the Helm chart (tests/deploy/test_chart.py): helm, kubeconform with JSON schemas
# of a pinned Kubernetes version (tools/k8s_schemas.py), and the kube-score linter. The tools come
# from the Go module proxy at these versions, built once per machine (tools/go_install.sh).
HELM_VERSION := v3.17.3
KUBECONFORM_VERSION := v0.7.0
KUBE_SCORE_VERSION := v1.20.0
CHART_TOOLS := $(HUB_HOME)/bin/.chart-tools-$(HELM_VERSION)-$(KUBECONFORM_VERSION)-$(KUBE_SCORE_VERSION)

.PHONY: chart-tools
chart-tools: $(CHART_TOOLS) $(HUB_HOME)/k8s-schemas/.fetched ## Build helm, kubeconform and kube-score; write the Kubernetes JSON schemas

$(CHART_TOOLS):
	tools/go_install.sh helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) $(HUB_HOME)/bin
	tools/go_install.sh github.com/yannh/kubeconform/cmd/kubeconform@$(KUBECONFORM_VERSION) $(HUB_HOME)/bin
	tools/go_install.sh github.com/zegl/kube-score/cmd/kube-score@$(KUBE_SCORE_VERSION) $(HUB_HOME)/bin
	@touch $@

$(HUB_HOME)/k8s-schemas/.fetched: tools/k8s_schemas.py tools/fetch_go.py
	$(PYTHON) tools/k8s_schemas.py $(HUB_HOME)/k8s-schemas
	@touch $@

# Kafka 4.1 and Spark 4.0 need Java 17 or later; Maven fetches the jars.
.PHONY: jdk
jdk: ## Install a Java 17 JDK and Maven from Debian packages when missing
	@if java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])' && command -v mvn >/dev/null; then \
	  echo "==> Java and Maven: $$(java -version 2>&1 | head -1), $$(mvn -B -v 2>/dev/null | head -1 | sed "s/\x1b\[[0-9;]*m//g")"; \
	else \
	  echo "==> Java 17 and Maven: installing the Debian packages"; \
	  $(SUDO) apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
	    openjdk-17-jdk-headless maven; \
	fi

.PHONY: postgres
postgres: ## Install the PostgreSQL server from Debian packages when missing
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  echo "==> PostgreSQL: $$(ls -d /usr/lib/postgresql/*/bin | head -1) present"; \
	else \
	  echo "==> PostgreSQL: installing the Debian package"; \
	  $(SUDO) apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql; \
	fi

# The console's tests drive Debian's Chromium through Playwright, which cannot fetch browsers here.
.PHONY: chromium
chromium: ## Install Chromium from Debian packages when missing (the console's browser tests)
	@if [ -x /usr/bin/chromium ]; then \
	  echo "==> Chromium: $$(/usr/bin/chromium --version 2>/dev/null | head -1)"; \
	else \
	  echo "==> Chromium: installing the Debian package"; \
	  $(SUDO) apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	fi

.PHONY: run
run: setup ## Set up, then run the whole local stack with demo feeds (Ctrl-C stops it)
	$(BIN)/hub up --demo

.PHONY: test
test: setup lint image chart-tools ## Set up, build the image and the chart's tools, then run the linters and the whole test suite
	$(BIN)/pytest $(PYTEST_ARGS)

.PHONY: test-unit
test-unit: setup ## Only the unit tests (no services)
	$(BIN)/pytest -m unit $(PYTEST_ARGS)

.PHONY: lint
lint: $(VENV)/.installed ## ruff (lint + format check), mypy and the import contracts
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

.PHONY: format
format: $(VENV)/.installed ## Format and auto-fix with ruff
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

.PHONY: lock
lock: ## Re-resolve requirements.lock from pyproject.toml
	$(BIN)/uv pip compile pyproject.toml --extra dev --python $(BIN)/python -o requirements.lock

.PHONY: clean
clean: ## Stop the local broker and metastore server, remove local state (keeps the jars and the venv)
	-$(BIN)/hub kafka stop
	-$(BIN)/hub metastore stop
	rm -rf $(HUB_HOME)/kafka $(HUB_HOME)/warehouse $(HUB_HOME)/metastore $(HUB_HOME)/checkpoints $(HUB_HOME)/loader-state $(HUB_HOME)/logs $(HUB_HOME)/registry.db*
