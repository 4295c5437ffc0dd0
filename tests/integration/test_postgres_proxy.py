"""Guarantee: the fault suite's proxy (``loadtest/postgres_proxy.py``) speaks to the real libpq
and PostgreSQL as it does to its fakes: a prepared statement cut after the server ran it has
run (its row is there) while its client sees a dropped connection; one cut before it reached
the server has not; latency lengthens each round trip by what it is set to."""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from tenantq.store.engine import psycopg_url

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "loadtest"))

from postgres_proxy import PostgresProxy  # noqa: E402

# The proxy reads the protocol, which TLS hides: a database without TLS (not make test-secure).
pytestmark = pytest.mark.plaintext_database


@pytest.fixture
def proxy(database_url: str) -> Iterator[PostgresProxy]:
    server = urlsplit(database_url)
    with PostgresProxy((server.hostname or "127.0.0.1", server.port or 5432)) as running:
        yield running


@pytest.fixture
def table(db: psycopg.Connection[Any]) -> Iterator[str]:
    name = f"proxy_probe_{uuid.uuid4().hex[:8]}"
    db.execute(f"CREATE TABLE {name} (n int)")
    yield name
    db.execute(f"DROP TABLE {name}")


def connect(proxy: PostgresProxy, database_url: str) -> psycopg.Connection[Any]:
    connection = psycopg.connect(proxy.url(psycopg_url(database_url)), autocommit=True)
    connection.prepare_threshold = 0  # as the worker's connections: prepared at once
    return connection


@pytest.mark.parametrize("applied", [True, False])
def test_a_cut_statement_ran_only_when_applied(
    proxy: PostgresProxy, database_url: str, db: psycopg.Connection[Any], table: str, applied: bool
) -> None:
    insert = f"INSERT INTO {table} (n) VALUES (%s)"
    with connect(proxy, database_url) as connection:
        connection.execute(insert, (1,))  # prepared: the cut below sees its Bind alone
        order = proxy.cut_next(f"INSERT INTO {table}", applied=applied)
        with pytest.raises(psycopg.OperationalError):
            connection.execute(insert, (2,))
    assert order.done.wait(5)
    rows = {row[0] for row in db.execute(f"SELECT n FROM {table}")}
    assert rows == ({1, 2} if applied else {1})


def test_latency_lengthens_each_round_trip(proxy: PostgresProxy, database_url: str) -> None:
    with connect(proxy, database_url) as connection:
        proxy.latency = 0.25
        started = time.monotonic()
        for _ in range(4):
            connection.execute("SELECT 1").fetchone()
        assert time.monotonic() - started >= 4 * 0.25
