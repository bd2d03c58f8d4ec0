# Two commands matter: `make demo` runs a real agent, `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo lint typecheck bench docs dist api-snapshot clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev,rich,mcp,otel,web,ag-ui,dbos,a2a,evals,azure,bedrock,vertex]"
	touch $(STAMP)

# The suite runs on pytest-xdist workers, one more than the cores (much of it waits on
# processes, paced streams and a browser); tests sharing a module fixture (a server, a DBOS
# launch) stay on one worker, long ones start first (tests/scheduling.py). The workers, and
# the processes the tests start (servers, durable workers, examples), are forked from one
# preloader of the run (tests/suite_preloader.py, tests/preloaded.py). It is CPU-bound:
# ~610 s of CPU and 6.5 minutes in the last whole run (2026-11-28, 4,737 tests, niced at a
# load of 1-3.5), where the tests that round left alone took 18% more CPU than in the run
# before it (~670 s, 5,091 tests): the machine was slower. In CI with the cores to itself
# before that round: 6.4 minutes, ~600 s of CPU. The target is 4. `make test
# PYTEST_WORKERS=0` runs it in one process.
# PYTHONDONTWRITEBYTECODE is cleared for the run: with it set, pytest rewrites the asserts of
# every test module again in each worker (about 12 s of CPU per worker) instead of caching them.
PYTEST_WORKERS ?= auto
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup

demo: $(STAMP)
	$(BIN)/python examples/quickstart.py

lint: $(STAMP)
	$(BIN)/ruff check src tests examples benchmarks
	$(BIN)/ruff format --check src tests examples benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy src

docs: $(STAMP)
	$(BIN)/python -m pip install -q -e ".[docs]"
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d build/site

# sdist and wheel in dist/, checked as PyPI would (docs/releasing.md). A small venv of its
# own (build and twine only): a release needs none of the dev extras.
DIST_VENV := build/dist-venv
dist:
	$(PYTHON) -m venv $(DIST_VENV)
	$(DIST_VENV)/bin/python -m pip install -q "build>=1.2" "twine>=5"
	rm -rf dist
	$(DIST_VENV)/bin/python -m build --outdir dist .
	$(DIST_VENV)/bin/twine check --strict dist/*

# Write the public API snapshot (tests/api/public_api.txt) after a reviewed change.
api-snapshot: $(STAMP)
	$(BIN)/python scripts/api_snapshot.py --update

bench: $(STAMP)
	$(BIN)/python benchmarks/loop_overhead.py
	$(BIN)/python benchmarks/loop_cost.py
	$(BIN)/python benchmarks/loop_parts.py

clean:
	rm -rf $(VENV) build dist
