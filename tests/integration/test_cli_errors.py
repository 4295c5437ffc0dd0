"""Guarantee: the `tenantq` command, run as operators run it, ends every error they can cause
with one line on stderr and a non-zero status, naming the server at fault and never its
password: a database on a port where nothing listens, a database URL that is not one, a
broker that refuses the client's SASL login (no librdkafka log lines either), absurd
durations and rates, an actor that is not a name, and a job id that names no job (which then
writes nothing)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import psycopg
import pytest
from support import free_port, one_line, settings_environment, tenantq_command

import tenantq

JOB = str(uuid.uuid4())


@pytest.mark.parametrize(
    "arguments",
    [
        ["jobs", "show", JOB],
        ["db", "current"],
        ["prune", "--older-than", "1d"],
        ["periodic", "list"],
        ["outbox", "relay", "--once"],
        ["stats"],
    ],
)
def test_a_database_nothing_listens_on_is_one_line_naming_it(
    settings: tenantq.Settings, arguments: list[str]
) -> None:
    port = free_port()
    environment = {
        **settings_environment(settings),
        "TENANTQ_DATABASE_URL": f"postgresql://ops:hunter2@127.0.0.1:{port}/jobs",
    }
    completed = tenantq_command(arguments, environment)
    assert completed.returncode == 2
    line = one_line(completed.stderr)
    assert line.startswith(f"tenantq: PostgreSQL at 127.0.0.1:{port}/jobs: ")
    assert "Connection refused" in line and "hunter2" not in line


def test_a_garbage_database_url_is_one_line_without_its_value(settings: tenantq.Settings) -> None:
    environment = {**settings_environment(settings), "TENANTQ_DATABASE_URL": "pg:hunter2@@x y"}
    completed = tenantq_command(["stats"], environment)
    assert completed.returncode == 2
    line = one_line(completed.stderr)
    assert "TENANTQ_DATABASE_URL is not a PostgreSQL URL" in line and "hunter2" not in line


def test_a_broker_refusing_the_login_is_one_line_naming_it(settings: tenantq.Settings) -> None:
    if settings.kafka_config.get("sasl.password"):
        # A secure stack (`make test-secure`): its own security settings, a wrong password.
        refused = {**settings.kafka_config, "sasl.password": "hunter2"}
    else:
        # The dev broker speaks plaintext only: a SASL handshake is refused at once.
        refused = {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "ops",
            "sasl.password": "hunter2",
        }
    environment = {**settings_environment(settings), "TENANTQ_KAFKA_CONFIG": json.dumps(refused)}
    started = time.monotonic()
    completed = tenantq_command(["dlq", "list"], environment)
    assert completed.returncode == 2 and completed.stdout == ""
    line = one_line(completed.stderr)  # no librdkafka log line
    assert line.startswith(f"tenantq: Kafka at {settings.require_bootstrap_servers()}: ")
    assert "SASL" in line and "hunter2" not in line
    assert time.monotonic() - started < 8  # refused: no waiting out the metadata timeout


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["prune", "--older-than", "99999999d", "--dry-run"], "at most 36500d"),
        (["dlq", "list", "--since", "99999999d"], "--since: '99999999d' is out of range"),
        (["dlq", "replay", "--dry-run", "--rate", "inf"], "got inf"),
        (["dlq", "replay", "--dry-run", "--rate", "nan"], "got nan"),
        (["dlq", "replay", "--dry-run", "--rate", "-1"], "got -1.0"),
        (["dlq", "replay", "--dry-run", "--rate", "0"], "got 0.0"),
        (["dlq", "replay", "--dry-run", "--actor", "ops\n<b>x</b>"], "is not a name"),
    ],
)
def test_absurd_input_is_one_line_and_changes_nothing(
    settings: tenantq.Settings, db: psycopg.Connection[Any], arguments: list[str], said: str
) -> None:
    audits = db.execute("SELECT count(*) FROM tenantq_replay_audit").fetchone()
    completed = tenantq_command(arguments, settings_environment(settings))
    assert completed.returncode == 2
    assert said in one_line(completed.stderr)
    assert db.execute("SELECT count(*) FROM tenantq_replay_audit").fetchone() == audits


def test_cancelling_an_unknown_job_is_an_error_and_writes_nothing(
    settings: tenantq.Settings, db: psycopg.Connection[Any]
) -> None:
    environment = settings_environment(settings)
    unknown = uuid.uuid4()
    completed = tenantq_command(["jobs", "cancel", str(unknown)], environment)
    assert completed.returncode == 1
    assert one_line(completed.stderr).startswith(f"tenantq: no such job {unknown}")
    assert db.execute("SELECT 1 FROM tenantq_jobs WHERE id = %s", (unknown,)).fetchone() is None

    # A job that is in Kafka but no worker has seen: said so explicitly, it is recorded.
    completed = tenantq_command(["jobs", "cancel", str(unknown), "--unseen"], environment)
    assert completed.returncode == 0 and "canceled" in completed.stdout
    row = db.execute("SELECT state::text FROM tenantq_jobs WHERE id = %s", (unknown,)).fetchone()
    assert row == ("canceled",)
