# Two commands set everything up on a fresh machine (Python 3.11 + Java 17):
#   make demo   -> runs the main job on the embedded defaults and prints a summary
#   make test   -> runs the whole test suite
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: install demo test dev validate clean

$(STAMP): pyproject.toml requirements.lock
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH"; exit 1; }
	@command -v java >/dev/null 2>&1 || { echo "need Java 17+ on PATH (PySpark 4)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

$(DAGSTER_HOME)/dagster.yaml: dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	cp dagster.yaml $(DAGSTER_HOME)/dagster.yaml

demo: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/cdc-assets demo

test: $(STAMP)
	$(BIN)/python -m pytest

dev: $(STAMP) $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/dagster dev -w workspace.yaml

validate: $(STAMP)
	$(BIN)/dagster definitions validate -w workspace.yaml

clean:
	rm -rf .cdc_assets .dagster_home
