# tenantq — developer entry points. Every target installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.tenantq-installed
BENCH_STAMP := $(VENV)/.tenantq-bench-installed

.PHONY: install test test-secure test-kafka39 lint typecheck unit integration demo dev-up dev-down dev-status bench faults hot-partition clean

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

# `make test` over a secure stack of its own (tests/integration/on_topology.py: a temporary
# home, down at the end, never the shared dev stack): Kafka over SASL_SSL with SCRAM-SHA-512
# and a CA of its own, PostgreSQL over TLS with a password. Every unit and integration test,
# the security scenarios (marker `secure`) included; the private-stack fault tests are left
# out, since they start plaintext servers of their own, and so are the tests that read the
# PostgreSQL protocol through a proxy (marker `plaintext_database`: TLS hides it). About 30 minutes on a busy machine.
test-secure: lint typecheck
	$(BIN)/python tests/integration/on_topology.py --secure -- \
		tests -q -m "((not slow and not private_stack) or secure) and not plaintext_database"

# The core guarantees against the oldest broker tenantq supports, Apache Kafka 3.9.1 (its jars
# resolved by Maven once), with the classic group protocol, on a stack of its own: the group
# is classic; the broker carries jobs and the topics are declared; producer; happy path;
# retries and scheduled jobs through the tiers; dead letters, undecodable records and replay;
# a member killed (-9), a handler killing its process, members joining and leaving
# (rebalance), a job longer than max.poll.interval.ms, graceful shutdown, a frozen worker's
# stale result; the outbox, transactional and with its relay killed.
KAFKA39_CORE := $(addprefix tests/integration/,test_group_protocol.py test_foundation.py \
	test_producer.py test_worker_happy_path.py test_retry_tiers.py test_scheduled_jobs.py \
	test_failures.py test_undecodable.py test_dlq_replay.py test_worker_kill.py \
	test_default_worker_survives_crash.py test_worker_membership.py test_worker_long_job.py \
	test_worker_shutdown.py test_worker_stale_result.py test_outbox_transactional.py \
	test_outbox_relay_crash.py)
test-kafka39: install
	$(BIN)/python tests/integration/on_topology.py --kafka-version 3.9.1 \
		--env TENANTQ_WORKER__GROUP_PROTOCOL=classic -- $(KAFKA39_CORE) -q -m "not private_stack"

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
# half load and end to end (100,000 jobs enqueued to running workers; a few minutes;
# reports/throughput-<time>/), each with a tracing-on variant (the otel extra comes with
# .[dev]). The dev database is migrated first.
bench: install $(BENCH_STAMP)
	$(BIN)/tenantq dev up
	$(BIN)/tenantq db upgrade
	$(BIN)/python loadtest/producer_bench.py --messages 50000 --rounds 2 --tracing
	$(BIN)/python loadtest/throughput_bench.py --end-to-end 100000

# The fault-scenario suite (minutes): every fault injected several times while a Zipf workload
# flows through three workers, on a private Kafka + Postgres (the dev stack is never touched);
# tables, reports/faults-<time>/report.md and summary.json. Exit status 0 when all checks pass.
faults: install
	$(BIN)/python loadtest/faults.py

# The hot-partition load test (minutes): one tenant floods at 100x the cold tenants' total
# through two default `tenantq worker` processes, with the noisy-neighbour protection on and
# off side by side; reports/hot-partition-<time>/ (report.md, summary.json, plots).
# Other scenarios: HOT_PARTITION_ARGS="--scenario zipf --scenario flood-10x".
# One producer sending the flood and the cold jobs (as one service does for all its tenants):
# HOT_PARTITION_ARGS="--scenario flood-100x --single-producer --repeat 3".
HOT_PARTITION_ARGS ?= --scenario flood-100x --compare
hot-partition: install
	$(BIN)/tenantq dev up
	$(BIN)/python loadtest/hot_partition.py $(HOT_PARTITION_ARGS)

clean:
	rm -rf build dist .mypy_cache .ruff_cache .pytest_cache
