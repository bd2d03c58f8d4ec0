# Two commands matter: `make demo` runs a real agent, `make test` runs the suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo lint typecheck bench docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[dev,rich,mcp,otel,web,ag-ui,dbos]"
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

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

bench: $(STAMP)
	$(BIN)/python benchmarks/loop_overhead.py

clean:
	rm -rf $(VENV) build dist
