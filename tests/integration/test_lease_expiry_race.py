"""Guarantee: a result that is on its way to Postgres while its lease expires, and reaches it
only after another worker has taken the job over, is refused by the fence. The race forced:
worker A's result statement is held in a proxy between A and Postgres, A is frozen past its
lease and its group session, worker B takes the job over and finishes it, then A goes on and
its held statement reaches the database. The job ends in exactly one terminal state (B's);
its second execution is accounted for by A's attempt, recorded as stale; A keeps working."""

from __future__ import annotations

import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from apps import APP
from pydantic import SecretStr
from support import (
    WorkerProcess,
    all_in,
    attempt_outcomes,
    executions,
    running_worker,
    short_leases,
    stale_attempts,
    wait_for,
)

import tenantq

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "loadtest"))

from postgres_proxy import PostgresProxy  # noqa: E402

# The proxy reads the protocol, which TLS hides: a database without TLS (not make test-secure).
pytestmark = pytest.mark.plaintext_database

#: A line of ``JOB_COMPLETE_BATCH`` (and of its ``_AGAIN`` form): the result statement.
RESULT_STATEMENT = "applied AS ("


@pytest.fixture
def proxy(database_url: str) -> Iterator[PostgresProxy]:
    server = urlsplit(database_url)
    with PostgresProxy((server.hostname or "127.0.0.1", server.port or 5432)) as running:
        yield running


def enqueue(settings: tenantq.Settings, seconds: float) -> uuid.UUID:
    with tenantq.Producer(settings) as producer:
        ref = producer.enqueue("sleepy", tenant="acme", payload={"seconds": seconds}).result(30)
    return ref.job_id


def test_a_result_held_past_its_lease_is_refused_after_the_takeover(
    make_settings: Any, db: psycopg.Connection[Any], database_url: str, proxy: PostgresProxy
) -> None:
    settings = make_settings(worker=short_leases())
    through_proxy = settings.model_copy(update={"database_url": SecretStr(proxy.url(database_url))})
    held_worker = WorkerProcess(
        through_proxy, "apps:APP", env={"TEST_RECORD_DATABASE_URL": database_url}
    )
    try:
        warm_up = enqueue(settings, 0.0)
        wait_for(lambda: all_in(db, [warm_up], {"succeeded"}), timeout=90, what="warm-up job")
        assert proxy.accepted > 0  # the worker reaches Postgres through the proxy

        holding = proxy.hold(RESULT_STATEMENT)
        job_id = enqueue(settings, 0.2)
        assert holding.wait(60), "the job's result statement never came"
        # A ran the job; its result is on its way, and the database still shows A's lease.
        assert executions(db, job_id) == [(1, "done")]
        leased = db.execute(
            "SELECT state::text, attempts, lease_owner FROM tenantq_jobs WHERE id = %s",
            (job_id,),
        ).fetchone()
        assert leased is not None and leased[:2] == ("leased", 1)
        owner_a = leased[2]

        held_worker.signal(signal.SIGSTOP)
        with running_worker(APP, settings, concurrency=2) as successor:
            wait_for(lambda: all_in(db, [job_id], {"succeeded"}), timeout=90, what="takeover")
            held_worker.signal(signal.SIGCONT)
            proxy.release()
            wait_for(
                lambda: stale_attempts(db, job_id) == 1,
                timeout=60,
                what="the held result to reach the database and be refused",
            )
            successor_id = successor.worker_id

        job = db.execute(
            "SELECT state::text, attempts, lease_owner, success_worker_id FROM tenantq_jobs "
            "WHERE id = %s",
            (job_id,),
        ).fetchone()
        assert job == ("succeeded", 2, None, successor_id)
        attempts = attempt_outcomes(db, job_id)
        assert attempts == [(1, owner_a, "stale"), (2, successor_id, "succeeded")]
        # Two executions: the duplicate is A's, whose result the fence refused.
        assert executions(db, job_id) == [(1, "done"), (2, "done")]

        # A lives on, and with B gone its next job goes through it (and the proxy) as usual.
        assert held_worker.process.poll() is None, held_worker.output()[-4000:]
        after = enqueue(settings, 0.0)
        wait_for(lambda: all_in(db, [after], {"succeeded"}), timeout=90, what="A's next job")
        row = db.execute(
            "SELECT success_worker_id FROM tenantq_jobs WHERE id = %s", (after,)
        ).fetchone()
        assert row is not None and f"-{held_worker.pid}-" in row[0]
    finally:
        proxy.release()
        held_worker.signal(signal.SIGCONT)
        held_worker.kill()
