"""Fixtures that talk to the real Apache Kafka broker and PostgreSQL.

Servers, in order of preference: the ones named by ``TENANTQ_KAFKA_BOOTSTRAP_SERVERS`` /
``TENANTQ_DATABASE_URL``; else the dev stack (``tenantq dev up``, started here if needed).
Each test session gets its own database; each test gets its own topic prefix, so tests never
see each other's messages or committed offsets.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from dead_letter_jobs import FlakyApp
from private_stack import PrivateStack
from support import migrated_database

import tenantq
from tenantq.devstack.stack import DevStack, external_endpoints
from tenantq.settings import QueueSettings, default_dev_home
from tenantq.store.engine import psycopg_url
from tenantq.topic_admin import declared_topics, delete_topics, ensure_topics

pytestmark = pytest.mark.integration

#: Short retry tiers so that retry scenarios finish in seconds.
TEST_RETRY_DELAYS = (1.0, 3.0, 10.0)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def servers() -> tuple[str, str]:
    """(bootstrap servers, server database URL) of real servers."""
    kafka, database = external_endpoints()
    if kafka is None or database is None:
        stack = DevStack(make_path(os.environ.get("TENANTQ_DEV_HOME")) or default_dev_home())
        stack.up(external_kafka=kafka, external_database=database)
        state = stack.read_state()
        kafka = kafka or state["kafka_bootstrap_servers"]
        database = database or state["database_url"]
    assert kafka and database
    return kafka, database


def make_path(value: str | None) -> Any:
    from pathlib import Path

    return Path(value) if value else None


@pytest.fixture(scope="session")
def database_url(servers: tuple[str, str]) -> Iterator[str]:
    """A fresh, migrated database for this test session."""
    _, server_url = servers
    with migrated_database(server_url, "tenantq_test_") as url:
        with psycopg.connect(psycopg_url(url), autocommit=True) as conn:
            # Test handlers (tests/integration/apps.py) record each execution here.
            conn.execute(
                "CREATE TABLE test_executions (job_id uuid, attempt int, pid int, note text, "
                "at timestamptz DEFAULT now())"
            )
        yield url


@pytest.fixture
def fresh_database(servers: tuple[str, str]) -> Iterator[str]:
    """A database of this test's own, just migrated to the head (its tables empty and never
    analysed), for a test that changes its schema or reads its plans; dropped afterwards."""
    _, server_url = servers
    with migrated_database(server_url, "tenantq_fresh_") as url:
        yield url


@pytest.fixture
def make_settings(
    servers: tuple[str, str], database_url: str
) -> Iterator[Callable[..., tenantq.Settings]]:
    """Build settings on the real servers with a topic prefix of this test's own, and ensure
    the topics of its queues. Keyword arguments override settings fields."""
    created: list[tenantq.Settings] = []

    def build(**overrides: Any) -> tenantq.Settings:
        bootstrap, _ = servers
        fields: dict[str, Any] = {
            "kafka_bootstrap_servers": bootstrap,
            "database_url": database_url,
            "topic_prefix": f"t{uuid.uuid4().hex[:12]}",
            "queues": {
                "default": QueueSettings(partitions=4, retry_delays_seconds=TEST_RETRY_DELAYS)
            },
            "metrics_port": 0,
        }
        fields.update(overrides)
        settings = tenantq.Settings(**fields)
        ensure_topics(settings)
        created.append(settings)
        return settings

    yield build
    for settings in created:
        try:
            delete_topics(settings, [spec.name for spec in declared_topics(settings)], timeout=10)
        except Exception:  # clean-up is best effort; the broker is per machine, not per test
            pass


@pytest.fixture
def settings(make_settings: Callable[..., tenantq.Settings]) -> tenantq.Settings:
    """Settings on the real stack: queue ``default`` (4 partitions, retry tiers 1 s, 3 s, 10 s)
    with its topics created under a prefix unique to this test."""
    return make_settings()


@pytest.fixture
def flaky(settings: tenantq.Settings) -> FlakyApp:
    """The DLQ scenarios' app on ``settings``: its jobs fail for good until ``fixed`` is set
    (``dead_letter_jobs.FlakyApp``)."""
    return FlakyApp(settings)


@pytest.fixture
def database_settings(database_url: str) -> tenantq.Settings:
    """Settings for a test of the database alone: the session's database and a topic prefix
    (deployment) of this test's own; no Kafka topics are made."""
    return tenantq.Settings(database_url=database_url, topic_prefix=f"t{uuid.uuid4().hex[:12]}")


@pytest.fixture
def db(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection to the test session's database, for assertions."""
    with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="module")
def private_stack() -> Iterator[PrivateStack]:
    """A Kafka broker and Postgres of the test module's own, killed at will, down at the end
    (for tests marked ``private_stack``)."""
    with PrivateStack() as stack:
        yield stack
