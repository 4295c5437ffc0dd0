# tenantq — developer entry points. Every target installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.tenantq-installed
BENCH_STAMP := $(VENV)/.tenantq-bench-installed

.PHONY: install test lint typecheck unit integration demo dev-up dev-down dev-status bench faults hot-partition clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Strict editable mode so mypy and IDEs see the package-dir mapping; re-run after adding a
# module (the target depends on every source file, so `make` does it for you).
$(STAMP): $(BIN)/python pyproject.toml $(shell find core partitioner producer consumer store schemas migrations dlq demo observability outbox periodic retention services testing web -type f \( -name '*.py' -o -name '*.avsc' -o -name '*.xml' -o -name '*.yaml' -o -name '*.ini' -o -name '*.mako' -o -name '*.html' -o -name '*.css' -o -name '*.js' \) 2>/dev/null)
	$(BIN)/pip install -q -e ".[dev]" --config-settings editable_mode=strict
	touch $(STAMP)

install: $(STAMP)

# ruff, then import-linter: the layers and no import circle (the contracts in pyproject.toml).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

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

# The main job: dev stack, migrations, topics, a supervised worker pool, 3,000 jobs of 40
# tenants with injected failures and one poison job, a live view, a checked summary and a
# report folder (reports/demo-<time>/: report.md and plots; matplotlib comes with .[dev]).
demo: install
	$(BIN)/tenantq demo

# The optional .[bench] extra (PgQueuer, asyncpg) for the throughput comparison. Not fatal:
# without it the benchmark runs tenantq alone and says so.
$(BENCH_STAMP): pyproject.toml | $(STAMP)
	@if $(BIN)/pip install -q -e ".[dev,bench]" --config-settings editable_mode=strict; \
	then touch $@; \
	else echo "make bench: the optional .[bench] extra (PgQueuer) did not install;" \
		"the throughput benchmark runs without its PgQueuer side"; fi

# Producer SDK vs raw produce, then no-op jobs through `tenantq worker` against PgQueuer's
# best configuration on the same Postgres, with CPU per job per process group and latency at
# half load (a few minutes; reports/throughput-<time>/), each with a tracing-on variant (the
# otel extra comes with .[dev]). The dev database is migrated first.
bench: install $(BENCH_STAMP)
	$(BIN)/tenantq dev up
	$(BIN)/tenantq db upgrade
	$(BIN)/python loadtest/producer_bench.py --messages 50000 --rounds 2 --tracing
	$(BIN)/python loadtest/throughput_bench.py

# The fault-scenario suite (minutes): every fault injected several times while a Zipf workload
# flows through three workers, on a private Kafka + Postgres (the dev stack is never touched);
# tables, reports/faults-<time>/report.md and summary.json. Exit status 0 when all checks pass.
faults: install
	$(BIN)/python loadtest/faults.py

# The hot-partition load test (minutes): one tenant floods at 100x the cold tenants' total
# through two default `tenantq worker` processes, with the noisy-neighbour protection on and
# off side by side; reports/hot-partition-<time>/ (report.md, summary.json, plots).
# Other scenarios: HOT_PARTITION_ARGS="--scenario zipf --scenario flood-10x".
HOT_PARTITION_ARGS ?= --scenario flood-100x --compare
hot-partition: install
	$(BIN)/tenantq dev up
	$(BIN)/python loadtest/hot_partition.py $(HOT_PARTITION_ARGS)

clean:
	rm -rf build dist .mypy_cache .ruff_cache .pytest_cache
