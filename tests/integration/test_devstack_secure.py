"""Guarantee: `tenantq dev up --secure` serves Kafka over SASL_SSL (SCRAM-SHA-512, a CA of
its own) and PostgreSQL over TLS with a SCRAM password; `dev env` gives a client all it needs
and jobs run through both; a wrong password is refused with a clear error by either server,
a plaintext connection is refused, and no password is in any log the stack writes or in what
its commands print (`dev env` aside, whose purpose it is)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient
from topology_stack import TopologyStack, run_jobs, topology_stack

from tenantq.devstack.processes import wait_until
from tenantq.store.engine import connect

pytestmark = [pytest.mark.slow, pytest.mark.private_stack]


@pytest.fixture(scope="module")
def secure() -> Iterator[TopologyStack]:
    with topology_stack(secure=True) as stack:
        yield stack


def _passwords(stack: TopologyStack) -> list[str]:
    return list(stack.state["secrets"].values())


def test_dev_env_gives_a_client_everything_and_jobs_run(secure: TopologyStack) -> None:
    exported = {
        name: shlex.split(value)[0]
        for name, value in (
            line.removeprefix("export ").split("=", 1)
            for line in secure.cli("dev", "env").stdout.splitlines()
        )
    }
    config = json.loads(exported["TENANTQ_KAFKA_CONFIG"])
    assert config["security.protocol"] == "SASL_SSL"
    assert config["sasl.mechanism"] == "SCRAM-SHA-512"
    assert Path(config["ssl.ca.location"]).is_file()
    url = exported["TENANTQ_DATABASE_URL"]
    assert "sslmode=verify-full" in url and "sslrootcert=" in url
    with secure.settings("secure") as settings:
        assert settings.kafka_config == secure.state["kafka_config"]
        runs = run_jobs(settings, 10)
        assert set(runs.values()) == {1}
        with connect(settings, autocommit=True) as conn:
            row = conn.execute(
                "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
            ).fetchone()
        assert row is not None and row[0] is True


def test_a_wrong_kafka_password_is_an_authentication_error(secure: TopologyStack) -> None:
    errors: list[KafkaError] = []
    config = {
        **secure.state["kafka_config"],
        "sasl.password": "not-the-password",
        "bootstrap.servers": secure.state["kafka_bootstrap_servers"],
        "error_cb": errors.append,
        "log_level": 0,
    }
    admin = AdminClient(config)

    def refused() -> bool:
        admin.poll(0.5)
        return any(error.code() == KafkaError._AUTHENTICATION for error in errors)

    assert wait_until(refused, timeout=30, interval=0.1), errors
    message = next(e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION)
    assert "Authentication failed" in message and "SCRAM-SHA-512" in message
    assert "not-the-password" not in message


def test_postgres_refuses_a_wrong_password_and_plaintext(secure: TopologyStack) -> None:
    url = secure.state["database_url"]
    password = secure.state["secrets"]["postgres_password"]
    with pytest.raises(
        psycopg.OperationalError, match='password authentication failed for user "postgres"'
    ):
        psycopg.connect(url.replace(password, "not-the-password"), connect_timeout=10)
    with pytest.raises(psycopg.OperationalError, match="no encryption"):
        psycopg.connect(url, sslmode="disable", connect_timeout=10)
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(url.replace(f":{password}@", "@"), connect_timeout=10)


def test_no_password_in_logs_or_command_output(secure: TopologyStack) -> None:
    passwords = _passwords(secure)
    assert len(passwords) == 3
    logs = [p for p in secure.home.rglob("*") if p.is_file() and p.suffix in (".log", ".out")]
    assert any(p.name == "server.log" for p in logs), logs
    for log in logs:
        content = log.read_text(errors="replace")
        assert not any(password in content for password in passwords), log
    outputs = [
        secure.cli("dev", "status").stdout,
        secure.cli("dev", "status", "--json").stdout,
        secure.cli("dev", "up").stdout,
    ]
    for output in outputs:
        assert not any(password in output for password in passwords), output
    assert (secure.home / "state.json").stat().st_mode & 0o077 == 0
