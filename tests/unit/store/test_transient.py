"""One rule for transient database errors (a deadlock, a serialisation failure), wrapped or
chained: recognised the same way, and retried in place the same number of times by the store
(its own transactions) and by the runner (a handler's database work). A connection refused
for its credentials, TLS or database name is told apart from weather, in one line."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tenantq.app import JobType
from tenantq.consumer.context import JobContext
from tenantq.consumer.runner import HandlerRunner, Task
from tenantq.errors import DatabaseUnavailable
from tenantq.store.job_store import JobStore
from tenantq.store.transient import (
    TRANSIENT_RETRIES,
    is_access_refused,
    is_transient_database_error,
    refused_access_line,
)


def test_transient_database_errors_are_recognised() -> None:
    class Deadlock(Exception):
        sqlstate = "40P01"

    class Wrapped(Exception):
        orig = Deadlock()

    assert is_transient_database_error(Deadlock())
    assert is_transient_database_error(Wrapped())
    try:
        try:
            raise Deadlock()
        except Deadlock as inner:
            raise RuntimeError("query failed") from inner
    except RuntimeError as outer:
        assert is_transient_database_error(outer)
    assert not is_transient_database_error(ValueError("no"))


class _Deadlock(Exception):
    sqlstate = "40P01"


def test_the_runner_reruns_a_handler_exactly_the_shared_number_of_times() -> None:
    calls: list[int] = []

    def handler(ctx: JobContext, payload: Any) -> None:
        calls.append(1)
        raise _Deadlock()

    finished = threading.Event()
    runner = HandlerRunner(1, lambda task: finished.set())
    job_type = JobType("deadlocking", "default", handler, None)
    context = JobContext(uuid.uuid4(), "default", "deadlocking", "t", 1, 3, deadline=1e12)
    runner.submit(Task(job_type, b"{}", context, deadline=1e12))
    assert finished.wait(10)
    runner.stop()
    assert len(calls) == TRANSIENT_RETRIES + 1


class _FailingConnection:
    """Every statement raises a deadlock: the first statement of a transaction block, or,
    on an autocommit connection (the worker's), the statement itself."""

    closed = False

    def __init__(self, autocommit: bool) -> None:
        self.autocommit = autocommit
        self.transactions = 0

    def close(self) -> None:
        self.closed = True

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        self.transactions += 1
        raise psycopg.errors.DeadlockDetected("deadlock detected")
        yield  # pragma: no cover

    @contextlib.contextmanager
    def cursor(self) -> Iterator[Any]:
        assert self.autocommit, "a connection without autocommit runs work in a block"
        self.transactions += 1
        raise psycopg.errors.DeadlockDetected("deadlock detected")
        yield  # pragma: no cover


@pytest.mark.parametrize("autocommit", [True, False])
def test_the_store_retries_its_transactions_the_same_number_of_times(
    monkeypatch: pytest.MonkeyPatch, autocommit: bool
) -> None:
    monkeypatch.setattr("tenantq.store.job_store.backoff_seconds", lambda retry: 0.0)
    connection = _FailingConnection(autocommit)
    store = JobStore(lambda: connection, "owner", deployment="tenantq")  # type: ignore[arg-type,return-value]
    # Still failing after the retries: the database is not healthy, the work is kept.
    with pytest.raises(DatabaseUnavailable):
        store.stop_worker()
    assert connection.transactions == TRANSIENT_RETRIES + 1


@pytest.mark.parametrize(
    "text",
    [
        'connection to server at "db", port 5432 failed: FATAL:  password authentication '
        'failed for user "app"',
        'connection to server at "db", port 5432 failed: fe_sendauth: no password supplied',
        'connection to server at "db", port 5432 failed: FATAL:  no pg_hba.conf entry for host '
        '"10.0.0.9", user "app", database "jobs", no encryption',
        'connection to server at "db", port 5432 failed: SSL error: certificate verify failed',
        'connection to server at "db", port 5432 failed: FATAL:  database "jobz" does not exist',
    ],
)
def test_a_connection_refused_as_configured_is_an_access_refusal(text: str) -> None:
    assert is_access_refused(psycopg.OperationalError(text))
    line = refused_access_line(psycopg.OperationalError(text + "\nDETAIL: more"))
    assert line.startswith("PostgreSQL refused tenantq's connection: connection to server at")
    assert "\n" not in line and "TENANTQ_DATABASE_URL" in line


@pytest.mark.parametrize(
    "error",
    [
        psycopg.OperationalError(
            'connection to server at "db", port 5432 failed: Connection refused'
        ),
        psycopg.OperationalError("server closed the connection unexpectedly"),
        psycopg.errors.UndefinedTable('relation "tenantq_jobs" does not exist'),
        ValueError("password authentication failed"),
    ],
)
def test_weather_and_other_errors_are_not_access_refusals(error: Exception) -> None:
    assert not is_access_refused(error)
