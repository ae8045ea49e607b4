# Two commands set everything up on a fresh machine (Python 3.11 + Java 17):
#   make demo   -> runs the main job on the embedded defaults and prints a summary
#   make test   -> runs the whole test suite
#   make bench  -> benchmarks against DuckDB and plain Spark, rewrites BENCHMARKS.md
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: install jvm-archive rest-fixture demo test dev connect-server validate bench clean

$(STAMP): pyproject.toml requirements.lock jars/pom.xml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH"; exit 1; }
	@command -v java >/dev/null 2>&1 || { echo "need Java 17+ on PATH (PySpark 4)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[dev]'
	@command -v mvn >/dev/null 2>&1 || { echo "need Maven (mvn) on PATH: it fetches the Iceberg and SQLite jars"; exit 1; }
	mvn --quiet --batch-mode -f jars/pom.xml dependency:copy-dependencies -DoutputDirectory=$(abspath $(VENV))/jars
	touch $(STAMP)

install: $(STAMP)

# The Spark driver JVM's class-data-sharing archive: each session starts about 3 s sooner
# (docs/configuration.md). Built once (about 40 s) for the UI and the benchmarks, where every
# run starts a JVM; sessions use it wherever it exists. A failure only leaves them without it
# (and no stamp, so the next `make dev` tries again). `make jvm-archive` always rebuilds it.
JVM_ARCHIVE_STAMP := $(VENV)/.jvm-archive
$(JVM_ARCHIVE_STAMP): $(STAMP)
	$(BIN)/cdc-assets jvm-archive && touch $(JVM_ARCHIVE_STAMP) || echo "no JVM class archive: Spark sessions start without one"

jvm-archive: $(STAMP)
	$(BIN)/cdc-assets jvm-archive && touch $(JVM_ARCHIVE_STAMP)

$(DAGSTER_HOME)/dagster.yaml: dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	cp dagster.yaml $(DAGSTER_HOME)/dagster.yaml

demo: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/cdc-assets demo

# Test only: Iceberg's REST catalog fixture and its dependencies (jars/rest-fixture/pom.xml), for
# the REST catalog test (cdc_assets_tests/servers.py rest_catalog; it fetches them itself when
# they are missing).
REST_FIXTURE_JARS := $(VENV)/rest-fixture-jars
$(REST_FIXTURE_JARS): jars/rest-fixture/pom.xml $(STAMP)
	rm -rf $(REST_FIXTURE_JARS)
	mvn --quiet --batch-mode -f jars/rest-fixture/pom.xml dependency:copy-dependencies -DoutputDirectory=$(abspath $(REST_FIXTURE_JARS))
	touch $(REST_FIXTURE_JARS)

rest-fixture: $(REST_FIXTURE_JARS)

# Test modules run on two processes (each its own local Spark); the daemon test's idle ticks and
# the driver-side gaps overlap: about a fifth faster on 2 cores (docs/architecture.md).
# TEST_WORKERS=0 runs serially.
TEST_WORKERS ?= 2
test: $(STAMP) $(REST_FIXTURE_JARS)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

dev: $(STAMP) $(JVM_ARCHIVE_STAMP) $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/dagster dev -w workspace.yaml

# A long-lived local Spark Connect server (foreground). In another shell,
# `CDC_ASSETS_SPARK_MASTER=sc://127.0.0.1:15002 make dev`: every run reuses its warm JVM.
connect-server: $(STAMP) $(JVM_ARCHIVE_STAMP)
	$(BIN)/cdc-assets connect-server

validate: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/dagster definitions validate -w workspace.yaml

# `make bench BENCH_EVENTS=20000 BENCH_RUNS=1 BENCH_HISTORY_WINDOWS=0 BENCH_TABLE_SIZES= BENCH_WIDE_TABLE=` is a quick smoke run.
BENCH_EVENTS          ?= 1000000,10000000
BENCH_RUNS            ?= 3
BENCH_HISTORY_WINDOWS ?= 25
BENCH_TABLE_SIZES     ?= 250000,1000000,4000000
BENCH_WIDE_TABLE      ?= 100000x60
BENCH_BUDGET_MINUTES  ?= 110
BENCH_STAMP := $(VENV)/.bench-installed

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[dev,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) $(JVM_ARCHIVE_STAMP)
	$(BIN)/python -m benchmarks --events $(BENCH_EVENTS) --runs $(BENCH_RUNS) \
		--history-windows $(BENCH_HISTORY_WINDOWS) --table-sizes '$(BENCH_TABLE_SIZES)' --wide-table '$(BENCH_WIDE_TABLE)' --budget-minutes $(BENCH_BUDGET_MINUTES) \
		--command "make bench BENCH_EVENTS=$(BENCH_EVENTS) BENCH_RUNS=$(BENCH_RUNS) BENCH_HISTORY_WINDOWS=$(BENCH_HISTORY_WINDOWS) BENCH_TABLE_SIZES=$(BENCH_TABLE_SIZES) BENCH_WIDE_TABLE=$(BENCH_WIDE_TABLE) BENCH_BUDGET_MINUTES=$(BENCH_BUDGET_MINUTES)"

clean:
	rm -rf .cdc_assets .dagster_home .bench_cache
