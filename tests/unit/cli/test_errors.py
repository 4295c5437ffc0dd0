"""Every command ends on an error with one line and a non-zero status: usage errors name the
command and option, tenantq's own errors and the servers' name the server, never a password;
only a bug of tenantq's is a traceback."""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy.exc
from confluent_kafka import KafkaError, KafkaException
from typer.testing import CliRunner

from tenantq.cli import app
from tenantq.cli.errors import describe
from tenantq.errors import ConfigurationError

DATABASE = "postgresql://app:hunter2@db.example:6543/jobs"


@pytest.fixture(autouse=True)
def servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENANTQ_DATABASE_URL", DATABASE)
    monkeypatch.setenv("TENANTQ_KAFKA_BOOTSTRAP_SERVERS", "kafka.example:9092")


def test_errors_an_operator_can_cause_are_one_line_naming_the_server() -> None:
    refused = psycopg.OperationalError(
        'connection to server at "db.example", port 6543 failed: password authentication '
        "failed for password hunter2\n\tIs the server running?"
    )
    assert describe(refused) == (
        'PostgreSQL at db.example:6543/jobs: connection to server at "db.example", port 6543 '
        "failed: password authentication failed for password *** Is the server running?"
    )
    wrapped = sqlalchemy.exc.OperationalError("SELECT 1", {}, refused)
    assert describe(wrapped) == describe(refused)
    missing = psycopg.errors.UndefinedTable("relation tenantq_jobs does not exist")
    assert describe(missing) == (
        "PostgreSQL at db.example:6543/jobs: the tenantq tables are missing; run "
        "`tenantq db upgrade`"
    )
    kafka = KafkaException(KafkaError(KafkaError._TRANSPORT, "Broker transport failure"))
    assert describe(kafka) == "Kafka at kafka.example:9092: Broker transport failure"
    assert describe(ConfigurationError("two\nlines")) == "two lines"
    assert len(describe(ConfigurationError("x" * 10_000)) or "") == 500


def test_a_bug_is_not_dressed_up() -> None:
    assert describe(ValueError("year -3166904 is out of range")) is None
    assert describe(KeyError("x")) is None


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (
            ["dlq", "replay", "--dry-run", "--rate", "inf"],
            "tenantq dlq replay: Invalid value for '--rate'",
        ),
        (["dlq", "replay", "--dry-run", "--rate", "nan"], "above 0 and at most 1,000,000, got nan"),
        (["dlq", "replay", "--dry-run", "--rate", "-5"], "got -5.0"),
        (["dlq", "replay", "--dry-run", "--rate", "0"], "got 0.0"),
        (["dlq", "replay", "--dry-run", "--actor", "a\n<b>"], "actor 'a\\n<b>' is not a name"),
        (["dlq", "purge", "--until", "1d", "--yes", "--actor", "x" * 101], "is not a name"),
        (["dlq", "list", "--since", "99999999d"], "--since: '99999999d' is out of range"),
        (["dlq", "show", "nope"], "neither a job id (a UUID) nor PARTITION@OFFSET"),
        (["prune", "--older-than", "99999999d", "--dry-run"], "at most 36500d (100 years)"),
        (["jobs", "cancel", "not-a-uuid"], "'not-a-uuid' is not a job id"),
        # The flags hold the bounds TENANTQ_WORKER__PROCESSES and __CONCURRENCY hold.
        (["worker", "x:app", "--processes", "65"], "less than or equal to 64"),
        (["worker", "x:app", "--concurrency", "10001"], "less than or equal to 10000"),
    ],
)
def test_bad_input_is_one_line_and_status_2(command: list[str], said: str) -> None:
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 2, result.output
    assert said in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("url", ["garbage://x y", "postgresql://a:hunter2@[::1", "hunter2"])
def test_a_garbage_database_url_is_one_line_without_its_value(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TENANTQ_DATABASE_URL", url)
    result = CliRunner().invoke(app, ["stats"])
    assert result.exit_code == 2
    assert result.output.strip() == (
        "tenantq: TENANTQ_DATABASE_URL is not a PostgreSQL URL: expected "
        "postgresql://user:password@host:port/database (the value is not shown: it may hold "
        "a password)"
    )


def test_a_group_without_a_command_still_shows_its_help() -> None:
    result = CliRunner().invoke(app, ["dlq"])
    assert "Commands" in result.output and "replay" in result.output
