# hivemesh: the two set-up commands are `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
STAMP  := $(VENV)/.installed
# The fast loop: everything but the JVM peers (Spark, the Java metastores, Hive streaming, Trino, HDFS).
QUICK  := not spark and not javahms and not hive4 and not hive_streaming and not trino and not hdfs
# Two pytest-xdist workers: most tests wait on servers and peers rather than compute. Tests run in
# groups (tests/conftest.py): each JVM peer's tests on one worker, the others file by file.
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

.PHONY: run test test-quick lint bench docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The main job needs hivemesh alone: no Kerberos (hivemesh[kerberos]), no test tools.
$(RUN_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e .
	touch $(RUN_STAMP)

# The tests: the Debian packages they start (scripts/test-deps.sh installs them as root, or stops
# with the apt-get line to run), then the dev extra (which builds gssapi against libkrb5-dev).
$(STAMP): $(RUN_STAMP) scripts/test-deps.sh
	./scripts/test-deps.sh
	$(BIN)/pip install --quiet -e '.[dev]'
	# hive-metastore-client pins thrift==0.13 (we need >=0.16); its generated code runs on the newer
	# thrift, so the conformance tests install it without its dependencies.
	$(BIN)/pip install --quiet --no-deps 'hive-metastore-client==1.0.9'
	touch $(STAMP)

run: $(RUN_STAMP)  ## the main job: TPC-H through Spark on a hivemesh metastore (embedded defaults)
	$(BIN)/hivemesh quickstart

test: $(STAMP)  ## the whole test suite (installs the Debian packages it needs when run as root)
	./scripts/test-deps.sh
	$(PYTEST)

test-quick: $(STAMP)  ## the tests without JVM peers: a few minutes, for development
	$(PYTEST) -m "$(QUICK)"

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
