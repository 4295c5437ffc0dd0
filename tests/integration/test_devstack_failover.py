"""Guarantee: `tenantq dev up --standby` streams the primary to a standby; `dev env` names
both in one URL that asks for the writable one; `dev failover` stops the primary and promotes
the standby, and a client of that URL (psycopg, SQLAlchemy, tenantq's own connections) finds
the new primary with every committed row; `dev up` then clones the old primary as the new
standby, and starts again a standby that was killed."""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import text
from topology_stack import TopologyStack, run_jobs, topology_stack

from tenantq.devstack.processes import wait_until
from tenantq.store.engine import LazyConnection, connect, create_sqlalchemy_engine, psycopg_url

pytestmark = [pytest.mark.slow, pytest.mark.private_stack]


@pytest.fixture(scope="module")
def replicated() -> Iterator[TopologyStack]:
    with topology_stack(standby=True) as stack:
        yield stack


def _roles(stack: TopologyStack) -> dict[str, tuple[str, bool]]:
    return {
        p["node"]: (p["role"], p["healthy"]) for p in stack.processes() if p["server"] == "postgres"
    }


def _server_port(connection: psycopg.Connection[Any]) -> int:
    row = connection.execute("SELECT inet_server_port()").fetchone()
    assert row is not None
    return int(row[0])


def test_the_standby_streams_and_the_url_names_both(replicated: TopologyStack) -> None:
    assert _roles(replicated) == {"a": ("primary", True), "b": ("standby", True)}
    exported = dict(
        line.removeprefix("export ").split("=", 1)
        for line in replicated.cli("dev", "env").stdout.splitlines()
    )
    url = shlex.split(exported["TENANTQ_DATABASE_URL"])[0]
    ports = [
        p["endpoint"].rsplit(":", 1)[1] for p in replicated.processes() if p["server"] == "postgres"
    ]
    assert f"port={','.join(ports)}" in url and "target_session_attrs=read-write" in url
    with psycopg.connect(
        replicated.state["database_url"].replace("/tenantq?", "/postgres?")
    ) as conn:
        senders = conn.execute("SELECT application_name, state FROM pg_stat_replication").fetchall()
    assert senders == [("tenantq-standby-b", "streaming")]


def test_failover_promotes_the_standby_and_clients_reconnect(replicated: TopologyStack) -> None:
    with replicated.settings("failover") as settings:
        run_jobs(settings, 10)
        service = LazyConnection(settings, "failover-test", autocommit=True)
        before = _server_port(service.get())
        service.get().execute("CREATE TABLE marks (n int)")
        service.get().execute("INSERT INTO marks SELECT generate_series(1, 1000)")
        engine = create_sqlalchemy_engine(settings)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM marks")).scalar() == 1000
        primary_port = int(replicated.process("postgres", "a")["endpoint"].rsplit(":", 1)[1])
        standby_port = int(replicated.process("postgres", "b")["endpoint"].rsplit(":", 1)[1])
        assert before == primary_port

        started = time.monotonic()
        output = replicated.cli("dev", "failover").stdout
        print(output.splitlines()[0], f"(the command: {time.monotonic() - started:.1f}s)")
        assert _roles(replicated) == {"a": ("standby", False), "b": ("primary", True)}

        with pytest.raises(psycopg.OperationalError):
            service.get().execute("SELECT 1")
        service.close()
        reconnected = time.monotonic()
        assert _server_port(service.get()) == standby_port
        row = service.get().execute("SELECT count(*), pg_is_in_recovery() FROM marks").fetchone()
        assert row == (1000, False)
        print(f"a new connection found the new primary in {time.monotonic() - reconnected:.2f}s")
        service.close()
        engine.dispose()
        with engine.connect() as conn:
            assert conn.execute(text("SELECT inet_server_port()")).scalar() == standby_port
        engine.dispose()
        # The same settings, unchanged, run jobs on the new primary.
        runs = run_jobs(settings, 10)
        assert set(runs.values()) == {1}

        seconds = replicated.up()
        assert _roles(replicated) == {"a": ("standby", True), "b": ("primary", True)}
        print(f"dev up cloned the old primary as the new standby in {seconds:.1f}s")
        with connect(settings, autocommit=True) as conn:
            conn.execute("INSERT INTO marks VALUES (1001)")

        def replicated_row() -> bool:
            # The old primary, now the standby, directly.
            with psycopg.connect(
                psycopg_url(settings.require_database_url()),
                host="127.0.0.1",
                port=primary_port,
                target_session_attrs="any",
            ) as conn:
                return conn.execute("SELECT count(*) FROM marks").fetchone() == (1001,)

        assert wait_until(replicated_row, timeout=30, interval=0.2)


def test_dev_up_starts_a_killed_standby_again(replicated: TopologyStack) -> None:
    standby = next(
        p for p in replicated.processes() if p["server"] == "postgres" and p["role"] == "standby"
    )
    replicated.kill(standby["pid"])
    assert _roles(replicated)[standby["node"]] == ("standby", False)
    replicated.up()
    assert _roles(replicated)[standby["node"]] == ("standby", True)
