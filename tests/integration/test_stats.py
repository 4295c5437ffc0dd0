"""Stats on the real Postgres: ``tenantq.store.stats`` equals direct counts of the job table,
the oldest runnable age is measured on the database clock over due jobs only, ``tenantq stats
--json`` prints the same numbers, and the collector exposes them on a scrape. Every number is
of one deployment: another deployment's jobs in a queue of the same name, and its workers,
are not counted."""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from prometheus_client import CollectorRegistry
from support import free_port
from typer.testing import CliRunner

import tenantq
from tenantq.cli import app
from tenantq.observability.queue_stats import QueueStatsCollector
from tenantq.observability.server import serve_metrics
from tenantq.store import stats
from tenantq.store.engine import DeploymentConnection, connect
from tenantq.store.statements import QUEUE_JOBS_DELETE

INSERT_JOB = """
INSERT INTO tenantq_jobs (
    id, deployment, queue, job_type, tenant_id, partition_key, state, max_attempts, run_after,
    lease_owner, lease_until, finished_at
)
VALUES (
    %(id)s, %(deployment)s, %(queue)s, %(job_type)s, %(tenant)s, %(tenant)s,
    %(state)s::job_state, 8,
    now() + %(run_after)s * interval '1 second',
    CASE WHEN %(state)s::job_state = 'leased' THEN 'worker-1' END,
    CASE WHEN %(state)s::job_state = 'leased' THEN now() + interval '30 seconds' END,
    CASE WHEN %(state)s::job_state IN ('succeeded', 'dead', 'canceled')
         THEN now() + %(finished)s * interval '1 second' END
)
"""

#: (tenant, job_type, state, run_after offset s, finished offset s, how many)
JOBS = [
    ("acme", "email", "runnable", -10, 0, 40),
    ("acme", "email", "leased", -400, 0, 5),  # leased: not waiting, its age must not count
    ("acme", "export", "retrying", -300, 0, 3),  # the oldest due job of the queue
    ("acme", "export", "retrying", 600, 0, 2),  # backing off: not due
    ("acme", "email", "succeeded", -60, -20, 30),  # in the last minute
    ("acme", "email", "succeeded", -600, -300, 50),  # in the last hour, not the last minute
    ("globex", "email", "pending", 3600, 0, 20),  # scheduled: depth, not age
    ("globex", "email", "pending", -50, 0, 4),  # pending but due
    ("globex", "email", "dead", -900, -600, 6),  # dead in the last hour
    ("globex", "email", "dead", -9000, -7200, 9),  # dead two hours ago
    ("initech", "email", "runnable", -5, 0, 7),
    ("initech", "export", "canceled", -5, -2, 3),
    ("hooli", "email", "runnable", -1, 0, 2),
    ("umbrella", "email", "leased", -1, 0, 1),
]


def _insert(
    db: psycopg.Connection[Any], deployment: str, queue: str, jobs: list[tuple[Any, ...]]
) -> None:
    rows = [
        {
            "id": uuid.uuid4(),
            "deployment": deployment,
            "queue": queue,
            "tenant": tenant,
            "job_type": job_type,
            "state": state,
            "run_after": run_after,
            "finished": finished,
        }
        for tenant, job_type, state, run_after, finished, count in jobs
        for _ in range(count)
    ]
    with db.cursor() as cursor:
        cursor.executemany(INSERT_JOB, rows)


#: Another deployment's jobs in a queue of the same name: the numbers must not include them.
NEIGHBOUR_JOBS = [
    ("acme", "email", "runnable", -900, 0, 11),
    ("acme", "email", "leased", -1, 0, 2),
    ("globex", "email", "dead", -900, -600, 4),
    ("soylent", "email", "succeeded", -60, -20, 8),
]


@pytest.fixture
def stats_settings(database_url: str) -> tenantq.Settings:
    """Settings of a deployment of this test's own."""
    return tenantq.Settings(
        database_url=database_url, metrics_port=0, topic_prefix=f"s{uuid.uuid4().hex[:10]}"
    )


@pytest.fixture
def db(stats_settings: tenantq.Settings) -> Iterator[DeploymentConnection]:
    """This module's connection: of the test's deployment, as the stats' callers open one."""
    with connect(stats_settings, autocommit=True) as connection:
        yield connection


@pytest.fixture
def queue(db: psycopg.Connection[Any], stats_settings: tenantq.Settings) -> Iterator[str]:
    """A queue of this test's own, filled with ``JOBS`` (the session database is shared), and
    a neighbour deployment's ``NEIGHBOUR_JOBS`` in a queue of the same name."""
    name = f"q{uuid.uuid4().hex[:10]}"
    ours, neighbour = stats_settings.topic_prefix, f"{stats_settings.topic_prefix}-neighbour"
    _insert(db, ours, name, JOBS)
    _insert(db, neighbour, name, NEIGHBOUR_JOBS)
    yield name
    for deployment in (ours, neighbour):
        db.execute(QUEUE_JOBS_DELETE, {"deployment": deployment, "queue": name})


def _direct(db: DeploymentConnection, where: str, queue: str, tenant: str | None = None) -> int:
    # Deliberately naive counts over the deployment's rows: the reference the stats must equal.
    sql = (
        "SELECT count(*) FROM tenantq_jobs"
        f" WHERE deployment = %(deployment)s AND queue = %(queue)s AND {where}"
    )
    if tenant is not None:
        sql += " AND tenant_id = %(tenant)s"
    parameters = {"deployment": db.deployment, "queue": queue, "tenant": tenant}
    row = db.execute(sql, parameters).fetchone()
    assert row is not None
    return int(row[0])


def _expected(db: DeploymentConnection, queue: str, tenant: str | None) -> dict[str, int]:
    return {
        "pending": _direct(db, "state = 'pending'", queue, tenant),
        "runnable": _direct(db, "state = 'runnable'", queue, tenant),
        "leased": _direct(db, "state = 'leased'", queue, tenant),
        "retrying": _direct(db, "state = 'retrying'", queue, tenant),
        "dead_last_hour": _direct(
            db, "state = 'dead' AND finished_at > now() - interval '1 hour'", queue, tenant
        ),
        "succeeded_last_minute": _direct(
            db, "state = 'succeeded' AND finished_at > now() - interval '1 minute'", queue, tenant
        ),
    }


def _counts(counts: stats.JobCounts) -> dict[str, int]:
    data = counts.as_dict()
    return {key: data[key] for key in _KEYS}


_KEYS = ("pending", "runnable", "leased", "retrying", "dead_last_hour", "succeeded_last_minute")


def test_stats_equal_direct_counts(db: DeploymentConnection, queue: str) -> None:
    (result,) = stats.job_stats_by_tenant(db, queues=[queue], top_tenants=10)
    assert result.queue == queue
    assert _counts(result.totals) == _expected(db, queue, None)
    assert result.totals.depth == _direct(
        db, "state IN ('pending', 'runnable', 'leased', 'retrying')", queue
    )
    assert set(result.tenants) == {"acme", "globex", "initech", "hooli", "umbrella"}
    for name, tenant in result.tenants.items():
        assert _counts(tenant.totals) == _expected(db, queue, name), name
    export = result.tenants["acme"].job_types["export"]
    assert (export.retrying, export.depth) == (5, 5)


def test_tenants_past_the_top_are_folded_into_other(db: DeploymentConnection, queue: str) -> None:
    (result,) = stats.job_stats_by_tenant(db, queues=[queue], top_tenants=2)
    # Volume: acme 40+5+5+30 = 80, globex 24+6 = 30, initech 7, hooli 2, umbrella 1.
    assert list(result.tenants) == ["acme", "globex", "other"]
    other = result.tenants["other"].totals
    assert (other.runnable, other.leased) == (9, 1)
    summed = result.tenants["acme"].totals + result.tenants["globex"].totals + other
    assert _counts(summed) == _counts(result.totals)
    (none_named,) = stats.job_stats_by_tenant(db, queues=[queue], top_tenants=0)
    assert list(none_named.tenants) == ["other"]
    assert _counts(none_named.tenants["other"].totals) == _expected(db, queue, None)
    assert stats.top_tenants([result]) == ["acme", "globex"]


def test_oldest_runnable_age_uses_due_jobs_and_the_database_clock(
    db: DeploymentConnection, queue: str
) -> None:
    (result,) = stats.job_stats_by_tenant(db, queues=[queue])
    age = result.totals.oldest_runnable_age_seconds
    # The retrying job due 300 s ago; not the leased one (400 s), not the scheduled ones.
    assert age is not None and 299 <= age < 330
    assert result.tenants["globex"].totals.oldest_runnable_age_seconds == pytest.approx(50, abs=30)
    assert result.tenants["umbrella"].totals.oldest_runnable_age_seconds is None
    empty = f"q{uuid.uuid4().hex[:10]}"
    ages = stats.job_oldest_runnable_age(db, [queue, empty])
    assert ages[empty] is None
    assert ages[queue] == pytest.approx(age, abs=5)
    (idle,) = stats.job_stats_by_tenant(db, queues=[empty])
    assert (idle.queue, idle.totals.depth, idle.tenants) == (empty, 0, {})


def test_worker_summary_splits_alive_from_stale(db: DeploymentConnection) -> None:
    ids = [f"w-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    insert = """
        INSERT INTO tenantq_workers (deployment, id, hostname, pid, queues, heartbeat_at,
                                     running_jobs, slots, stopped_at)
        VALUES (%s, %s, 'host', 1, ARRAY['default'], now() - %s * interval '1 second', %s, 8,
                CASE WHEN %s THEN now() END)
    """
    ours, neighbour = db.deployment, f"{db.deployment}-neighbour"
    with db.cursor() as cursor:
        cursor.executemany(
            insert,
            [
                (ours, ids[0], 1, 3, False),
                (ours, ids[1], 600, 8, False),
                (ours, ids[2], 1, 8, True),
                # The same worker ids in another deployment: not ours to count.
                (neighbour, ids[0], 1, 5, False),
                (neighbour, ids[2], 1, 5, False),
            ],
        )
    try:
        summary = stats.worker_summary(db, stale_after_seconds=60)
        assert (summary.alive, summary.stale, summary.slots, summary.busy_slots) == (1, 1, 8, 3)
    finally:
        db.execute("DELETE FROM tenantq_workers WHERE id = ANY(%s)", (ids,))


def test_cli_json_matches_the_database(
    db: DeploymentConnection, queue: str, database_url: str
) -> None:
    result = CliRunner().invoke(
        app,
        ["stats", "--queue", queue, "--top", "3", "--json"],
        env={
            "TENANTQ_DATABASE_URL": database_url,
            "TENANTQ_KAFKA_BOOTSTRAP_SERVERS": "b:9092",
            "TENANTQ_TOPIC_PREFIX": db.deployment,
        },
    )
    assert result.exit_code == 0, result.output
    output = json.loads(result.stdout)
    assert output["deployment"] == db.deployment
    (queue_data,) = output["queues"]
    assert queue_data["queue"] == queue
    assert {key: queue_data[key] for key in _KEYS} == _expected(db, queue, None)
    tenants = {tenant["tenant"]: tenant for tenant in queue_data["tenants"]}
    assert list(tenants) == ["acme", "globex", "initech", "other"]
    for name in ("acme", "globex", "initech"):
        assert {key: tenants[name][key] for key in _KEYS} == _expected(db, queue, name)
    assert tenants["other"]["depth"] == 3  # hooli 2 + umbrella 1
    assert 299 <= queue_data["oldest_runnable_age_seconds"] < 330
    assert tenants["acme"]["job_types"]["export"]["retrying"] == 5


def test_cli_table_renders(queue: str, database_url: str, db: DeploymentConnection) -> None:
    result = CliRunner().invoke(
        app,
        ["stats", "--queue", queue],
        env={
            "TENANTQ_DATABASE_URL": database_url,
            "COLUMNS": "160",
            "TENANTQ_TOPIC_PREFIX": db.deployment,
        },
    )
    assert result.exit_code == 0, result.output
    assert f"queue {queue}" in result.stdout
    assert "acme" in result.stdout and "total" in result.stdout
    assert "5m0" in result.stdout  # the 300 s oldest age, as minutes
    assert "soylent" not in result.stdout  # the neighbour deployment's tenant


def test_collector_exposes_the_numbers_on_a_scrape(
    db: DeploymentConnection, queue: str, stats_settings: tenantq.Settings
) -> None:
    registry = CollectorRegistry()
    collector = QueueStatsCollector(
        lambda: connect(stats_settings), queues=[queue], top_tenants=2, min_interval_seconds=0
    )
    registry.register(collector)
    server = serve_metrics(registry, "127.0.0.1", free_port())
    assert server is not None
    try:
        with urllib.request.urlopen(server.url, timeout=10) as response:
            body = response.read().decode()
    finally:
        server.close()
        collector.close()
    samples = _parse(body)
    assert samples[("tenantq_stats_up", ())] == 1
    age = samples[("tenantq_oldest_runnable_age_seconds", (("queue", queue),))]
    assert 299 <= age < 330

    def depth(state: str, tenant: str | None = None) -> float:
        return sum(
            value
            for (name, labels), value in samples.items()
            if name == "tenantq_queue_depth"
            and dict(labels).get("queue") == queue
            and dict(labels)["state"] == state
            and (tenant is None or dict(labels)["tenant"] == tenant)
        )

    expected = _expected(db, queue, None)
    for state in ("pending", "runnable", "leased", "retrying"):
        assert depth(state) == expected[state], state
    assert depth("runnable", "other") == 9  # initech 7 + hooli 2 past the top 2
    assert {dict(labels)["tenant"] for (name, labels) in samples if "tenant" in dict(labels)} == {
        "acme",
        "globex",
        "other",
    }
    dead = sum(v for (n, _), v in samples.items() if n == "tenantq_jobs_dead_last_hour")
    assert dead == expected["dead_last_hour"]
    # The same query names the busiest tenants a worker preloads its metric labels with.
    by_tenant = stats.job_stats_by_tenant(db, queues=[queue], top_tenants=2)
    assert stats.top_tenants(by_tenant) == ["acme", "globex"]


def _parse(body: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }
