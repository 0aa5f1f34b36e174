# kbroker: `make run` serves on 127.0.0.1:9092 with data in ./data; `make test` runs the whole suite.
# `make run SERVE_ARGS="--create-topics orders:3"` passes more options to `kbroker serve`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
LISTEN ?= 127.0.0.1:9092
DATA_DIR ?= ./data
# Integration tests mostly wait on brokers and clients: four workers, one test file each at a time.
PYTEST_ARGS ?= -n 4 --dist loadfile
SERVE_ARGS ?=

.PHONY: run test typecheck venv test-venv system-deps kafkajs go-modules kafka-jars librdkafka-tests kafka cluster codegen bench chaos analyze clean

$(VENV)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed
	$(PIP) install --quiet -e '.[test,pipeline,bench,cluster]'
	touch $@

# The analytics job needs the pipeline extra only (PySpark, pyarrow, pandas), not the test environment.
$(VENV)/.installed-pipeline: pyproject.toml $(VENV)/.installed
	$(PIP) install --quiet -e '.[pipeline]'
	touch $@

venv: $(VENV)/.installed

test-venv: $(VENV)/.installed-test

run: venv
	@echo "kbroker is $(VENV)/bin/kbroker (or run '. $(VENV)/bin/activate' to have it on PATH); Ctrl-C stops it"
	$(VENV)/bin/kbroker serve --listen $(LISTEN) --data-dir $(DATA_DIR) $(SERVE_ARGS)

# Debian packages the tests use: kcat; chromium, which renders the analytics report headless
# (tests/pipeline/test_report_browser.py); iproute2 for the network namespaces of the Spark cluster and
# compose tests; postgresql (15 on Debian 12) for kbroker over PostgreSQL (tests/integration/postgres.py
# runs a scratch server). Installed only when missing; needs root, as in CI.
SYSTEM_PACKAGES := kcat chromium iproute2 postgresql
system-deps:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "missing:$$missing and we are not root: their tests will be skipped"; fi; fi

# kafkajs from npm, into the test-local tests/clients/kafkajs/node_modules (pinned by its package-lock.json).
KAFKAJS_DIR := tests/clients/kafkajs
$(KAFKAJS_DIR)/node_modules/.installed: $(KAFKAJS_DIR)/package.json $(KAFKAJS_DIR)/package-lock.json
	cd $(KAFKAJS_DIR) && npm ci --no-audit --no-fund --silent
	touch $@

kafkajs: $(KAFKAJS_DIR)/node_modules/.installed

# The Go clients (tests/clients/franz: franz-go; tests/clients/sarama: IBM/sarama), Go modules pinned by
# their go.sum, fetched from the Go module proxy into Go's module cache (~/go/pkg/mod); the tests build them
# with this Go (1.26, not whatever `go` is first on PATH) into build/clients/go.
GO ?= /usr/local/go/bin/go
GO_MODULES := tests/clients/franz tests/clients/sarama
go-modules:
	@for m in $(GO_MODULES); do (cd $$m && GOTOOLCHAIN=local GOFLAGS="-mod=readonly -buildvcs=false" $(GO) mod download) || exit 1; done

# Apache Kafka 4.4.0 (broker, tools, Java clients, Streams) from Maven Central into build/kafka/libs, the
# reference the tests compare kbroker with (tests/reference/pom.xml); Maven caches the jars in ~/.m2.
KAFKA_LIBS := build/kafka/libs
$(KAFKA_LIBS)/.resolved: tests/reference/pom.xml
	rm -rf $(KAFKA_LIBS)
	mvn -q -B -Dstyle.color=never -f tests/reference/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(KAFKA_LIBS)
	touch $@

kafka-jars: $(KAFKA_LIBS)/.resolved

# librdkafka's own C test suite (tests/integration/test_librdkafka_*.py run chosen tests against kbroker):
# librdkafka 2.15.1 with its tests/ as npm's @confluentinc/kafka-javascript 1.10.1 bundles it, packed by npm
# into build/librdkafka-2.15.1 (keyed by the version: a rerun finds it built) and built in 40 s of CPU
# here: the library unoptimized (-O0: half the compile time; the tests wait, they do not compute), without
# GSSAPI (no Cyrus libsasl2; PLAIN/SCRAM are built in), libcurl or an external LZ4 (the bundled one serves),
# then a tests/test-runner of only the tests the suite runs, listed by librdkafka_suite.py (the other ~170
# are stubs that fail if run). The whole test-runner at -O2 took 5 minutes.
LIBRDKAFKA_VERSION := 2.15.1
LIBRDKAFKA_NPM := @confluentinc/kafka-javascript@1.10.1
LIBRDKAFKA_DIR := build/librdkafka-$(LIBRDKAFKA_VERSION)
LIBRDKAFKA_SRC := $(LIBRDKAFKA_DIR)/package/deps/librdkafka
$(LIBRDKAFKA_SRC)/src-cpp/librdkafka++.a:
	mkdir -p $(LIBRDKAFKA_DIR)
	cd $(LIBRDKAFKA_DIR) && rm -rf package *.tgz && npm pack --silent $(LIBRDKAFKA_NPM) >/dev/null && tar xzf confluentinc-kafka-javascript-*.tgz package/deps/librdkafka
	cd $(LIBRDKAFKA_SRC) && ./configure --disable-gssapi --disable-curl --disable-lz4-ext --disable-syslog --disable-optimization >/dev/null
	$(MAKE) -C $(LIBRDKAFKA_SRC) -j2 libs >/dev/null

$(LIBRDKAFKA_SRC)/tests/test-runner: $(LIBRDKAFKA_SRC)/src-cpp/librdkafka++.a tests/integration/librdkafka_suite.py | $(VENV)/.installed
	$(PY) -m kbroker.tests.integration.librdkafka_suite stubs $(LIBRDKAFKA_SRC)/tests
	$(MAKE) -C $(LIBRDKAFKA_SRC)/tests -f kbroker-tests.mk -f Makefile -j2 test-runner >/dev/null
	touch $@

librdkafka-tests: $(LIBRDKAFKA_SRC)/tests/test-runner

# The reference broker in the foreground (one KRaft node on a free loopback port; KAFKA_ARGS="--set k=v").
KAFKA_ARGS ?=
kafka: test-venv kafka-jars
	$(PY) -m kbroker.tests.reference.kafka $(KAFKA_ARGS)

# A cluster over PostgreSQL in the foreground (docs/postgres-cluster.md): a scratch PostgreSQL and three
# nodes on 127.0.0.1:9092-9094 (CLUSTER_ARGS="--nodes 5 --port 19092"); Ctrl-C stops it all.
CLUSTER_ARGS ?=
cluster: test-venv system-deps
	$(PY) -m kbroker.tests.integration.postgres_cluster $(CLUSTER_ARGS)

test: test-venv system-deps kafkajs kafka-jars go-modules librdkafka-tests
	$(PY) -m kbroker.tools.codegen --check
	$(VENV)/bin/lint-imports --no-cache
	$(MAKE) --no-print-directory typecheck
	KBROKER_REQUIRE_KAFKA=1 KBROKER_REQUIRE_GO=1 KBROKER_REQUIRE_POSTGRES=1 KBROKER_REQUIRE_LIBRDKAFKA_TESTS=1 GO=$(GO) $(VENV)/bin/pytest $(PYTEST_ARGS)

# mypy over the runtime packages ([tool.mypy] in pyproject.toml). The repository root is the package
# `kbroker` only once installed, so mypy reads it through build/mypy/kbroker, a symlink to the root.
typecheck: test-venv
	@mkdir -p build/mypy && ln -sfn ../.. build/mypy/kbroker
	$(VENV)/bin/mypy

codegen: venv
	$(PY) -m kbroker.tools.codegen

# An installed kbroker (pip, the Docker image) has its bytecode compiled at install; the bench compiles
# a checkout's before its first broker start (bench/brokers.py compile_bytecode), since with
# PYTHONDONTWRITEBYTECODE every start would compile every module and the figures would measure that.
# Apache Kafka 4.4, a peer beside Tansu, runs from the reference jars (BENCH_ARGS="--peers tansu" leaves it out).
BENCH_ARGS ?=
bench: test-venv kafka-jars
	$(PY) -m bench $(BENCH_ARGS)

# Seeded fault campaign (kill -9, disk damage, state-file damage, malformed frames under load); SEED=, ROUNDS= to vary.
SEED ?= 1
ROUNDS ?= 25
chaos: test-venv
	$(PY) -m kbroker.tests.faults.chaos --seed $(SEED) --rounds $(ROUNDS)

# The PySpark analytics over ./data (see docs/analytics.md; Java 17 or newer); ARGS="--master spark://HOST:7077" etc.
analyze: $(VENV)/.installed-pipeline
	$(VENV)/bin/kbroker analyze --data-dir $(DATA_DIR) --out ./report $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis .mypy_cache
