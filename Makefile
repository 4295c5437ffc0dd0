# tenantq — developer entry points. Every target installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.tenantq-installed

.PHONY: install test lint typecheck unit integration demo dev-up dev-down dev-status bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Strict editable mode so mypy and IDEs see the package-dir mapping; re-run after adding a
# module (the target depends on every source file, so `make` does it for you).
$(STAMP): $(BIN)/python pyproject.toml $(shell find core partitioner producer consumer store schemas migrations -type f \( -name '*.py' -o -name '*.avsc' -o -name '*.xml' -o -name '*.yaml' -o -name '*.ini' -o -name '*.mako' \) 2>/dev/null)
	$(BIN)/pip install -q -e ".[dev]" --config-settings editable_mode=strict
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy -p tenantq

unit: install
	$(BIN)/pytest tests/unit -q

# The whole suite: lint, types, unit, integration against the real Kafka broker and PostgreSQL
# (started by the dev stack unless TENANTQ_KAFKA_BOOTSTRAP_SERVERS / TENANTQ_DATABASE_URL are set).
test: lint typecheck
	$(BIN)/tenantq dev up
	$(BIN)/pytest tests -q

integration: install
	$(BIN)/tenantq dev up
	$(BIN)/pytest tests/integration -q

dev-up: install
	$(BIN)/tenantq dev up

dev-down: install
	$(BIN)/tenantq dev down

dev-status: install
	$(BIN)/tenantq dev status

demo: install
	$(BIN)/tenantq demo

clean:
	rm -rf build dist .mypy_cache .ruff_cache .pytest_cache
