# hivemesh: the two set-up commands are `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint bench docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e '.[dev]'
	# hive-metastore-client pins thrift==0.13 (we need >=0.16); its generated code runs on the newer
	# thrift, so the conformance tests install it without its dependencies.
	$(BIN)/pip install --quiet --no-deps 'hive-metastore-client==1.0.9'
	touch $(STAMP)

run: $(STAMP)  ## the main job: TPC-H through Spark on a hivemesh metastore (embedded defaults)
	$(BIN)/hivemesh quickstart

test: $(STAMP)  ## the whole test suite
	$(BIN)/python -m pytest

lint: $(STAMP)  ## style, the layer contract (pyproject.toml [tool.importlinter]) and types of the lower layers
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/metastore.py

docs: $(STAMP)  ## docs/configuration.md from the config models and CLI options (tests/test_config_reference.py checks it)
	$(BIN)/python -m hivemesh.config_reference --output docs/configuration.md

clean:
	rm -rf $(VENV) .pytest_cache  # never hivemesh-data/: the default metastore keeps its catalog there
