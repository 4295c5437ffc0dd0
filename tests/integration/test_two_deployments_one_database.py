"""Guarantee: two deployments (topic prefixes) on one database never see or touch each
other. Both run at once, with the same queue name, the same tenant names, the same periodic
schedule name and the same idempotency key: each worker runs only its own jobs; a tenant that
floods one deployment goes to that deployment's hot lane only, and the other's lane keeper
does not take it out; each console, API, ``tenantq stats``, ``jobs show | cancel`` and
``prune`` lists and acts on its own jobs, tenants, lanes, workers, schedules and outbox rows;
and a message on one deployment's topic that carries the other's job id (forged or misrouted)
is dead-lettered as a conflict while the other's job row stays as it was."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
from fastapi.testclient import TestClient
from support import all_in, count_of, counting_app, flood, running_worker, wait_for
from typer.testing import CliRunner
from web_console import console_settings

import tenantq
from tenantq.background import BackgroundService
from tenantq.cli import app as cli
from tenantq.partitioner.placement import Placement
from tenantq.periodic.scheduler import PeriodicScheduler
from tenantq.producer.request import EnqueueRequest
from tenantq.services.worker_services import background_services
from tenantq.store.engine import connect, psycopg_url
from tenantq.store.placement import placement_list, placement_upsert
from tenantq.web.app import create_app

TOKEN = "two-deployments-token"
BEARER = {"Authorization": f"Bearer {TOKEN}", "X-Tenantq-Actor": "ops"}
#: The names both deployments use.
SCHEDULE = "nightly-report"
KEY = "order-1"
COLD = ("acme", "globex", "initech")
WHALE = "whale"


def deployment_settings(make_settings: Any) -> tenantq.Settings:
    return make_settings(
        queues={"default": tenantq.QueueSettings(partitions=2, retry_delays_seconds=(1.0, 3.0))},
        # A whale moves to the lane at 50 waiting jobs and stays there for the test's length.
        tenant_isolation={"hot_backlog": 50, "release_after_seconds": 600.0},
        producer={"placement_ttl_seconds": 0.5},
        periodic={"poll_interval_seconds": 0.2},
    )


def deployment_app(settings: tenantq.Settings) -> tuple[tenantq.App, Any]:
    app, runs = counting_app(settings, "work", seconds=0.005)
    app.periodic(SCHEDULE, job_type="work", tenant="ops", payload={"tick": True}, every=1)
    return app, runs


@contextlib.contextmanager
def services(app: tenantq.App, settings: tenantq.Settings) -> Iterator[list[BackgroundService]]:
    """What ``tenantq worker`` runs beside the worker: outbox relay, periodic scheduler,
    pruner, lane keeper."""
    started: list[BackgroundService] = background_services(app, settings, ["default"])
    for service in started:
        service.start()
    try:
        yield started
    finally:
        for service in started:
            service.stop(10)


def job_rows(db: psycopg.Connection[Any], deployment: str) -> dict[uuid.UUID, tuple[Any, ...]]:
    rows = db.execute(
        "SELECT id, state::text, attempts, updated_at FROM tenantq_jobs WHERE deployment = %s",
        (deployment,),
    ).fetchall()
    return {row[0]: tuple(row[1:]) for row in rows}


def cli_json(settings: tenantq.Settings, *arguments: str) -> Any:
    result = CliRunner().invoke(cli, list(arguments), env=cli_environment(settings))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def cli_environment(settings: tenantq.Settings) -> dict[str, str]:
    return {
        "TENANTQ_DATABASE_URL": settings.require_database_url(),
        "TENANTQ_KAFKA_BOOTSTRAP_SERVERS": settings.require_bootstrap_servers(),
        "TENANTQ_TOPIC_PREFIX": settings.topic_prefix,
        "TENANTQ_QUEUES": json.dumps({"default": {"partitions": 2}}),
    }


def test_two_deployments_share_a_database_and_nothing_else(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    flooded, quiet = deployment_settings(make_settings), deployment_settings(make_settings)
    flooded_app, flooded_runs = deployment_app(flooded)
    quiet_app, quiet_runs = deployment_app(quiet)

    # The same tenants in both; only the flooded deployment's whale floods.
    with tenantq.Producer(flooded, flooded_app) as producer:
        whale_jobs, flooded_cold = flood(producer, WHALE, 400, COLD)
        flooded_waiting = waiting_jobs(producer)
    with tenantq.Producer(quiet, quiet_app) as producer:
        quiet_jobs = [
            producer.enqueue("work", tenant=tenant, payload={"i": i}).result(30).job_id
            for i, tenant in enumerate((*COLD, WHALE, WHALE))
        ]
        quiet_waiting = waiting_jobs(producer)
    # One idempotency key in both deployments' outboxes: two jobs, one each.
    outboxed = {}
    for settings, app in ((flooded, flooded_app), (quiet, quiet_app)):
        with (
            tenantq.Outbox(app) as outbox,
            psycopg.connect(psycopg_url(settings.require_database_url())) as conn,
        ):
            ref = outbox.enqueue(conn, "work", tenant="acme", payload={}, idempotency_key=KEY)
            assert ref.created
            outboxed[settings.topic_prefix] = ref.job_id
    # An operator's placement in the quiet deployment only.
    with connect(quiet, autocommit=True) as operator:
        placement_upsert(
            operator, queue="default", tenant_id="globex", placement=Placement.pinned([1])
        )

    with (
        services(flooded_app, flooded) as flooded_services,
        services(quiet_app, quiet) as quiet_services,
        running_worker(flooded_app, flooded, concurrency=2) as flooded_worker,
        running_worker(quiet_app, quiet, concurrency=2) as quiet_worker,
    ):
        wait_for(
            lambda: lane_tenants(db, flooded) == {WHALE}, timeout=60, what="the whale in a lane"
        )
        everything_quiet = [*quiet_jobs, outboxed[quiet.topic_prefix]]
        wait_for(lambda: all_in(db, everything_quiet, {"succeeded"}), timeout=60, what="quiet")
        everything_flooded = [*whale_jobs, *flooded_cold, outboxed[flooded.topic_prefix]]
        wait_for(lambda: all_in(db, everything_flooded, {"succeeded"}), timeout=120, what="flooded")
        wait_for(
            lambda: ticks(db, flooded) >= 2 and ticks(db, quiet) >= 2, timeout=30, what="ticks"
        )
        # The schedules stop ticking, so that the counts below hold still.
        for service in (*flooded_services, *quiet_services):
            if isinstance(service, PeriodicScheduler):
                service.stop(10)
        wait_for(
            lambda: not unfinished_ticks(db, flooded) and not unfinished_ticks(db, quiet),
            timeout=30,
            what="the last ticks run",
        )
        # The whale is in the flooded deployment's lane, and only there; the quiet one's lane
        # keeper, which releases its own drained lane, did not take it out.
        assert lane_tenants(db, flooded) == {WHALE} and lane_tenants(db, quiet) == set()

        # A message on the quiet deployment's topic that carries the flooded deployment's
        # job ids: a finished job, and one still waiting for its due time.
        before = job_rows(db, flooded.topic_prefix)
        forged = [flooded_cold[0], flooded_waiting["acme"]]
        with tenantq.Producer(quiet, quiet_app) as producer:
            for job_id in forged:
                request = EnqueueRequest("work", "acme", {"forged": True}, job_id=job_id)
                producer.enqueue_many([request])[0].result(30)
        quiet_console = TestClient(
            create_app(console_settings(quiet, TOKEN)), base_url="http://127.0.0.1"
        )
        wait_for(
            lambda: (
                {
                    letter["job_id"]
                    for letter in quiet_console.get("/api/dlq").json()["letters"]
                    if letter["error_class"] == "JobConflict"
                }
                == {str(job_id) for job_id in forged}
            ),
            timeout=30,
            what="the forged messages dead-lettered",
        )
        letters = quiet_console.get("/api/dlq").json()["letters"]
        assert all("another deployment" in letter["error_message"] for letter in letters)
        assert all(letter["job_state"] is None for letter in letters)  # not the quiet one's
        assert job_rows(db, flooded.topic_prefix) == before  # not one column changed

        flooded_console = TestClient(
            create_app(console_settings(flooded, TOKEN)), base_url="http://127.0.0.1"
        )
        # Each console, the deployment it belongs to, the other one, its worker, and where it
        # shows the tenants placed.
        for console, ours, theirs, worker, placed in (
            (flooded_console, flooded, quiet, flooded_worker, {WHALE: "lane", "globex": "hashed"}),
            (quiet_console, quiet, flooded, quiet_worker, {WHALE: "hashed", "globex": "pinned"}),
        ):
            check_console(console, db, ours, theirs, worker_id=worker.worker_id, placed=placed)
        # Each deployment's stats: its own tenants, lane and worker.
        flooded_stats = cli_json(flooded, "stats", "--json", "--top", "50")
        quiet_stats = cli_json(quiet, "stats", "--json", "--top", "50")
        assert [t["tenant"] for t in flooded_stats["hot_lane"]["default"]] == [WHALE]
        assert quiet_stats["hot_lane"]["default"] == []
        assert flooded_stats["workers"]["alive"] == quiet_stats["workers"]["alive"] == 1
        assert flooded_stats["deployment"] == flooded.topic_prefix

    # Each worker ran its own jobs, each once, and nothing of the other's.
    flooded_ids = set(job_rows(db, flooded.topic_prefix))
    quiet_ids = set(job_rows(db, quiet.topic_prefix))
    assert not flooded_ids & quiet_ids
    assert set(flooded_runs) <= flooded_ids and set(quiet_runs) <= quiet_ids
    assert set(everything_flooded) <= set(flooded_runs)
    assert set(everything_quiet) <= set(quiet_runs)
    assert all(count == 1 for count in (*flooded_runs.values(), *quiet_runs.values()))
    # The registry, the schedules and the outbox rows are each deployment's own.
    for settings in (flooded, quiet):
        deployment = settings.topic_prefix
        workers = db.execute(
            "SELECT count(*) FROM tenantq_workers WHERE deployment = %s", (deployment,)
        ).fetchone()
        assert workers == (1,)
        (schedule,) = cli_json(settings, "periodic", "list", "--json")
        assert schedule["name"] == SCHEDULE
        last = uuid.UUID(schedule["last_job_id"])
        assert last in (flooded_ids if settings is flooded else quiet_ids)
        unsent = db.execute(
            "SELECT count(*) FROM tenantq_outbox WHERE deployment = %s", (deployment,)
        ).fetchone()
        assert unsent == (0,)

    # The CLI of one deployment cannot show, cancel or prune the other's jobs.
    flooded_env = cli_environment(flooded)
    theirs = str(quiet_waiting["acme"])
    shown = CliRunner().invoke(cli, ["jobs", "show", theirs], env=flooded_env)
    assert shown.exit_code == 1 and "no such job" in shown.output
    canceled = CliRunner().invoke(cli, ["jobs", "cancel", theirs], env=flooded_env)
    assert canceled.exit_code == 1
    assert job_rows(db, quiet.topic_prefix)[quiet_waiting["acme"]][0] == "pending"
    quiet_before = job_rows(db, quiet.topic_prefix)
    pruned = CliRunner().invoke(cli, ["prune", "--older-than", "0s"], env=flooded_env)
    assert pruned.exit_code == 0, pruned.output
    assert set(job_rows(db, flooded.topic_prefix)) == set(flooded_waiting.values())
    assert job_rows(db, quiet.topic_prefix) == quiet_before


def waiting_jobs(producer: tenantq.Producer) -> dict[str, uuid.UUID]:
    """A job due in ten minutes for each tenant that has a placement somewhere: they wait
    (pending), so each console lists those tenants for the whole test."""
    return {
        tenant: producer.enqueue("work", tenant=tenant, payload={}, delay=600).result(30).job_id
        for tenant in ("acme", "globex", WHALE)
    }


def lane_tenants(db: psycopg.Connection[Any], settings: tenantq.Settings) -> set[str]:
    with connect(settings, autocommit=True) as connection:
        return {record.tenant_id for record in placement_list(connection) if record.mode == "lane"}


def _schedule_jobs(db: psycopg.Connection[Any], settings: tenantq.Settings, condition: str) -> int:
    """Periodic jobs of the deployment's schedule that meet ``condition``."""
    return count_of(
        db,
        "SELECT count(*) FROM tenantq_jobs WHERE deployment = %s AND idempotency_key LIKE %s"
        f" AND {condition}",
        (settings.topic_prefix, f"periodic:{SCHEDULE}:%"),
    )


def unfinished_ticks(db: psycopg.Connection[Any], settings: tenantq.Settings) -> int:
    return _schedule_jobs(db, settings, "finished_at IS NULL")


def ticks(db: psycopg.Connection[Any], settings: tenantq.Settings) -> int:
    """Periodic jobs of the deployment's schedule that ran."""
    return _schedule_jobs(db, settings, "state = 'succeeded'")


def check_console(
    console: TestClient,
    db: psycopg.Connection[Any],
    settings: tenantq.Settings,
    other: tenantq.Settings,
    *,
    worker_id: str,
    placed: dict[str, str],
) -> None:
    """One deployment's console lists its own jobs, tenants (with ``placed``: tenant ->
    placement), placements and worker (``worker_id``), and its buttons do nothing to the
    other deployment's jobs or placements."""
    ours, theirs = job_rows(db, settings.topic_prefix), job_rows(db, other.topic_prefix)
    with connect(other, autocommit=True) as connection:
        their_placements = placement_list(connection)
    overview = console.get("/api/queues").json()
    (queue,) = overview["queues"]
    unfinished = ("pending", "runnable", "leased", "retrying")
    assert queue["jobs"]["depth"] == sum(1 for row in ours.values() if row[0] in unfinished)
    assert [worker["id"] for worker in overview["workers"]] == [worker_id]
    listed = {uuid.UUID(job["id"]) for job in console.get("/api/jobs").json()["jobs"]}
    assert listed and listed <= set(ours)
    tenants = console.get("/api/tenants", params={"queue": "default"}).json()["tenants"]
    assert {row["tenant"]: row["placement"] for row in tenants if row["tenant"] in placed} == (
        placed
    )
    someone_elses = next(job_id for job_id, row in theirs.items() if row[0] == "succeeded")
    assert console.get(f"/api/jobs/{someone_elses}").status_code == 404
    assert console.post(f"/api/jobs/{someone_elses}/cancel", headers=BEARER).status_code == 404
    assert console.post(f"/api/jobs/{someone_elses}/run", headers=BEARER).status_code == 404
    # The Tenants page's "release" of the other deployment's placed tenants: nothing here.
    for record in their_placements:
        release = {"queue": "default", "tenant": record.tenant_id, "action": "release"}
        answer = console.post("/tenants/placement", data=release, headers=BEARER)
        assert answer.status_code == 200 and "already hashed" in answer.text
    with connect(other, autocommit=True) as connection:
        assert placement_list(connection) == their_placements
    assert job_rows(db, other.topic_prefix) == theirs
